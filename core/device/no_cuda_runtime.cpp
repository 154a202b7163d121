// The CUDA runtime's answers in builds against a CPU-only LibTorch: there is no GPU.
#include "core/device/cuda_runtime.hpp"

namespace lrmoe {

bool cuda_build() {
  return false;
}

std::optional<GpuProperties> gpu_properties(int64_t) {
  return std::nullopt;
}

std::optional<int64_t> peak_allocated_bytes(const torch::Device&) {
  return std::nullopt;
}

void reset_peak_allocated_bytes(const torch::Device&) {}

void synchronize(const torch::Device&) {}

}  // namespace lrmoe
