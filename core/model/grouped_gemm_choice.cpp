#include "core/model/grouped_gemm_choice.hpp"

#include <fmt/format.h>

#include <optional>
#include <stdexcept>

#include "core/device/cuda_runtime.hpp"
#include "core/system/libtorch_compat.hpp"

namespace lrmoe {
namespace {

// Why at::_grouped_mm cannot run this model here; none when it can. Its operands need rows whose
// byte strides are multiples of 16: every dimension a GEMM contracts or produces.
std::optional<std::string> grouped_mm_obstacle(const torch::Device& device, torch::ScalarType dtype,
                                               const ModelConfig& model) {
  if (!compat::kHasGroupedMm)
    return fmt::format("LibTorch {} has no at::_grouped_mm (2.9 and later have it)", TORCH_VERSION);
  const int64_t per_16_bytes = 16 / static_cast<int64_t>(c10::elementSize(dtype));
  for (int64_t dimension : {model.hidden_size, model.expert_ffn_size}) {
    if (dimension % per_16_bytes != 0)
      return fmt::format(
          "at::_grouped_mm needs the hidden and expert FFN sizes ({} and {}) to be multiples of "
          "{} in {}",
          model.hidden_size, model.expert_ffn_size, per_16_bytes, c10::toString(dtype));
  }
  if (device.is_cuda()) {
    const std::optional<GpuProperties> gpu = gpu_properties(device.index());
    if (!gpu || gpu->major < 8)
      return fmt::format("at::_grouped_mm needs compute capability 8.0 or more; {} has {}.{}",
                         device.str(), gpu ? gpu->major : 0, gpu ? gpu->minor : 0);
  }
  return std::nullopt;
}

}  // namespace

GroupedGemmSelection choose_grouped_gemm_kernel(GroupedGemmChoice choice,
                                                const torch::Device& device,
                                                torch::ScalarType dtype, const ModelConfig& model) {
  if (choice == GroupedGemmChoice::SliceLoop)
    return {GroupedGemmKernel::SliceLoop, "train.grouped_gemm = \"slice-loop\""};
  const std::optional<std::string> obstacle = grouped_mm_obstacle(device, dtype, model);
  if (choice == GroupedGemmChoice::GroupedMm) {
    if (obstacle)
      throw std::invalid_argument(fmt::format(
          "train.grouped_gemm = \"grouped-mm\": {}; set it to \"auto\" or \"slice-loop\"",
          *obstacle));
    return {GroupedGemmKernel::GroupedMm, "train.grouped_gemm = \"grouped-mm\""};
  }
  if (!device.is_cuda())
    return {GroupedGemmKernel::SliceLoop,
            "auto on the CPU: one GEMM per expert slice, the slices spread over the threads"};
  if (obstacle) return {GroupedGemmKernel::SliceLoop, "auto: " + *obstacle};
  return {GroupedGemmKernel::GroupedMm, fmt::format("auto on {}", device.str())};
}

}  // namespace lrmoe
