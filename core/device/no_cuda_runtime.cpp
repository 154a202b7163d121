// The CUDA runtime's answers in builds against a CPU-only LibTorch: there is no GPU.
#include "core/device/cuda_runtime.hpp"

#include <stdexcept>

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

class DeviceEvent {};

std::shared_ptr<DeviceEvent> record_event(const torch::Device& device) {
  throw std::logic_error("no CUDA events in a CPU-only build (asked for " + device.str() + ")");
}

bool event_reached(const DeviceEvent&) {
  return true;
}

void wait_for(const DeviceEvent&) {}

double elapsed_seconds(const DeviceEvent&, const DeviceEvent&) {
  return 0;
}

}  // namespace lrmoe
