#pragma once
// What lrmoe asks of the CUDA runtime. Builds against a CUDA LibTorch compile cuda_runtime.cpp;
// CPU-only builds compile no_cuda_runtime.cpp, whose answers say that there is no GPU.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace lrmoe {

// Whether this build was compiled against a CUDA LibTorch (it may still see no GPU).
bool cuda_build();

struct GpuProperties {
  std::string name;  // "NVIDIA H200"
  int major = 0;     // compute capability
  int minor = 0;
  int64_t memory_bytes = 0;
};

// The GPU with this index; none in CPU-only builds or where it is not visible.
std::optional<GpuProperties> gpu_properties(int64_t index);

// The CUDA caching allocator's peak of allocated bytes on `device` since the last reset; none on
// the CPU (Note [Memory model] in docs/notes.md: recorded beside the modeled peak).
std::optional<int64_t> peak_allocated_bytes(const torch::Device& device);
void reset_peak_allocated_bytes(const torch::Device& device);

// A point in the work queued on a CUDA stream: a CUDA event with timing (defined in
// cuda_runtime.cpp; CPU-only builds never create one).
class DeviceEvent;
// An event recorded now on `device`'s current stream. Throws std::logic_error on the CPU.
std::shared_ptr<DeviceEvent> record_event(const torch::Device& device);
// Whether the device has passed `event`; never waits.
bool event_reached(const DeviceEvent& event);
// Waits until the device has passed `event`.
void wait_for(const DeviceEvent& event);
// Seconds from `from` to `to`, waiting for `to` if the device has not reached it.
double elapsed_seconds(const DeviceEvent& from, const DeviceEvent& to);

// Waits for the work queued on `device` (nothing to wait for on the CPU): benchmarks only.
void synchronize(const torch::Device& device);

}  // namespace lrmoe
