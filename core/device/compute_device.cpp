#include "core/device/compute_device.hpp"

#include <fmt/format.h>
#include <torch/cuda.h>

#include <stdexcept>

#include "core/device/cuda_runtime.hpp"

namespace lrmoe {

torch::Device resolve_device(DeviceChoice choice, int64_t local_rank) {
  if (choice == DeviceChoice::Cpu) return torch::kCPU;
  const auto visible = static_cast<int64_t>(torch::cuda::device_count());
  if (choice == DeviceChoice::Auto && (!cuda_build() || visible == 0)) return torch::kCPU;
  if (!cuda_build()) {
    throw std::invalid_argument(
        "train.device = \"cuda\": this lrmoe is built against a CPU-only LibTorch; build against "
        "a CUDA one (scripts/setup.sh --cuda, or scripts/gpu-check.sh on a GPU machine) or set "
        "train.device = \"cpu\"");
  }
  if (local_rank >= visible) {
    throw std::invalid_argument(fmt::format(
        "train.device = \"{}\": process {} of this host needs cuda:{}, but {} GPU{} visible "
        "(CUDA_VISIBLE_DEVICES); start at most one process per GPU or set train.device = \"cpu\"",
        choice == DeviceChoice::Auto ? "auto" : "cuda", local_rank, local_rank, visible,
        visible == 1 ? " is" : "s are"));
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
}

CollectiveBackend resolve_backend(CollectiveBackend backend, const torch::Device& device) {
  if (backend != CollectiveBackend::Auto) return backend;
#ifdef LRMOE_WITH_NCCL
  if (device.is_cuda()) return CollectiveBackend::Nccl;
#endif
  return CollectiveBackend::Gloo;
}

const char* backend_name(CollectiveBackend backend) {
  switch (backend) {
    case CollectiveBackend::Gloo:
      return "gloo";
    case CollectiveBackend::Nccl:
      return "nccl";
    case CollectiveBackend::Auto:
      break;
  }
  return "auto";
}

torch::ScalarType compute_dtype(Precision precision) {
  return precision == Precision::Bf16 ? torch::kBFloat16 : torch::kFloat32;
}

const char* precision_name(Precision precision) {
  return precision == Precision::Bf16 ? "bf16" : "fp32";
}

std::string device_description(const torch::Device& device) {
  if (!device.is_cuda()) return "cpu";
  const std::optional<GpuProperties> gpu = gpu_properties(device.index());
  if (!gpu) return device.str();
  return fmt::format("{} ({}, sm{}{}, {:.1f} GiB)", device.str(), gpu->name, gpu->major, gpu->minor,
                     static_cast<double>(gpu->memory_bytes) / (1 << 30));
}

}  // namespace lrmoe
