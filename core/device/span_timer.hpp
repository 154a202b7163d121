#pragma once
// Times spans of work issued to a device (Note [Device timing] in docs/notes.md). On the CPU a
// span is the host clock from start() to stop(). On CUDA its ends are events recorded on the
// current stream: the host only enqueues them, take() hands them over unread, and the trainer
// reads them one step later, when the device has long passed them, so timing adds no wait.

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/device/cuda_runtime.hpp"

namespace lrmoe {

// Spans taken from a timer, not yet read: host seconds measured at once, device events whose
// time is read only by read().
class TimedSpans {
 public:
  // The spans' seconds. On CUDA it waits for the last span's end if the device has not reached
  // it yet, and then sets `waited` when given (left as it is otherwise).
  double read(bool* waited = nullptr) const;
  // Adds `other`'s spans to these (a layer's several timers summed as one figure).
  TimedSpans& operator+=(const TimedSpans& other);

 private:
  friend class SpanTimer;
  double host_seconds_ = 0;
  std::vector<std::pair<std::shared_ptr<DeviceEvent>, std::shared_ptr<DeviceEvent>>> events_;
};

class SpanTimer {
 public:
  // Starts a span of the work issued to `device` from now on.
  void start(const torch::Device& device);
  // Ends the span started last.
  void stop();
  // Adds seconds that were not measured here: a model's charge (tests count operations).
  void charge(double seconds) { spans_.host_seconds_ += seconds; }
  // The spans stopped since the last call, unread; starts afresh.
  TimedSpans take();
  // take() read at once: for benchmarks and tests that synchronised before asking.
  double take_seconds() { return take().read(); }

 private:
  std::optional<torch::Device> device_;
  std::chrono::steady_clock::time_point started_;
  std::shared_ptr<DeviceEvent> open_;
  TimedSpans spans_;
};

}  // namespace lrmoe
