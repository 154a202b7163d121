#pragma once
// Times spans of work issued to a device (Note [Device timing] in docs/notes.md). On the CPU a
// span is the host clock from start() to stop(). On CUDA its ends are events recorded on the
// current stream: the host only enqueues them, and take_seconds() reads them after the step's
// own synchronisation, when the device has passed them, so timing adds no wait to the step.

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/device/cuda_runtime.hpp"

namespace lrmoe {

class SpanTimer {
 public:
  // Starts a span of the work issued to `device` from now on.
  void start(const torch::Device& device);
  // Ends the span started last.
  void stop();
  // Adds seconds that were not measured here: a model's charge (tests count operations).
  void charge(double seconds) { host_seconds_ += seconds; }
  // Seconds of the spans stopped since the last call. On CUDA it waits for the last span's end
  // if the device has not reached it yet (counted by stalls()).
  double take_seconds();
  // How many reads had to wait for the device: zero when the step synchronised before them.
  int64_t stalls() const { return stalls_; }

 private:
  std::optional<torch::Device> device_;
  std::chrono::steady_clock::time_point started_;
  double host_seconds_ = 0;
  std::shared_ptr<DeviceEvent> open_;
  std::vector<std::pair<std::shared_ptr<DeviceEvent>, std::shared_ptr<DeviceEvent>>> spans_;
  int64_t stalls_ = 0;
};

}  // namespace lrmoe
