// The CUDA runtime's answers in builds against a CUDA LibTorch.
#include "core/device/cuda_runtime.hpp"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

namespace lrmoe {
namespace {

bool visible(int64_t index) {
  return index >= 0 && index < static_cast<int64_t>(c10::cuda::device_count());
}

}  // namespace

bool cuda_build() {
  return true;
}

std::optional<GpuProperties> gpu_properties(int64_t index) {
  if (!visible(index)) return std::nullopt;
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
  return GpuProperties{p->name, p->major, p->minor, static_cast<int64_t>(p->totalGlobalMem)};
}

std::optional<int64_t> peak_allocated_bytes(const torch::Device& device) {
  if (!device.is_cuda() || !visible(device.index())) return std::nullopt;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  const auto all = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return stats.allocated_bytes[all].peak;
}

void reset_peak_allocated_bytes(const torch::Device& device) {
  if (!device.is_cuda() || !visible(device.index())) return;
  c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda() && visible(device.index())) c10::cuda::device_synchronize();
}

}  // namespace lrmoe
