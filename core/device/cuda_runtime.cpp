// The CUDA runtime's answers in builds against a CUDA LibTorch.
#include "core/device/cuda_runtime.hpp"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>

#include <mutex>
#include <set>

namespace lrmoe {
namespace {

bool visible(int64_t index) {
  return index >= 0 && index < static_cast<int64_t>(c10::cuda::device_count());
}

// The caching allocator sets up its per-device state on the first CUDA tensor; before that its
// statistics calls refuse every device ("Invalid device argument"). So the first statistics call
// of a process on a device makes a one-byte tensor there and frees it. Later calls allocate
// nothing, and every peak lrmoe reports is read after a reset that follows it.
void ensure_allocator(const torch::Device& device) {
  static std::mutex mutex;
  static std::set<c10::DeviceIndex> ready;
  const std::lock_guard<std::mutex> lock(mutex);
  if (ready.insert(device.index()).second)
    (void)torch::empty({1}, torch::TensorOptions().dtype(torch::kUInt8).device(device));
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
  ensure_allocator(device);
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  const auto all = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return stats.allocated_bytes[all].peak;
}

void reset_peak_allocated_bytes(const torch::Device& device) {
  if (!device.is_cuda() || !visible(device.index())) return;
  ensure_allocator(device);
  c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
}

class DeviceEvent {
 public:
  c10::cuda::CUDAEvent event{cudaEventDefault};  // with timing
};

std::shared_ptr<DeviceEvent> record_event(const torch::Device& device) {
  auto recorded = std::make_shared<DeviceEvent>();
  recorded->event.record(at::cuda::getCurrentCUDAStream(device.index()));
  return recorded;
}

bool event_reached(const DeviceEvent& event) {
  return event.event.query();
}

void wait_for(const DeviceEvent& event) {
  event.event.synchronize();
}

double elapsed_seconds(const DeviceEvent& from, const DeviceEvent& to) {
  to.event.synchronize();
  return static_cast<double>(from.event.elapsed_time(to.event)) / 1e3;
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda() && visible(device.index())) c10::cuda::device_synchronize();
}

}  // namespace lrmoe
