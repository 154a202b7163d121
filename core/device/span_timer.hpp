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

// One span where it lies: when the host started it (host_clock_ns, the steady clock every
// process of a host reads alike) and how long it took on its device.
struct SpanInterval {
  int64_t start_ns = 0;
  double seconds = 0;
};

// Spans taken from a timer, not yet read: host seconds measured at once, device events whose
// time is read only by read().
class TimedSpans {
 public:
  // The spans' seconds. On CUDA it waits for the last span's end if the device has not reached
  // it yet, and then sets `waited` when given (left as it is otherwise).
  double read(bool* waited = nullptr) const;
  // Each span on its own, in the order they were stopped (a step's timeline, `lrmoe trace`). On
  // CUDA a span starts where the host issued it and lasts what the device took; charged seconds
  // have no place and are left out.
  std::vector<SpanInterval> intervals() const;
  // Adds `other`'s spans to these (a layer's several timers summed as one figure).
  TimedSpans& operator+=(const TimedSpans& other);

 private:
  friend class SpanTimer;
  struct DeviceSpan {
    int64_t issued_ns = 0;
    std::shared_ptr<DeviceEvent> from, to;
  };
  double host_seconds_ = 0;
  std::vector<std::pair<int64_t, int64_t>> host_spans_;  // [start_ns, end_ns)
  std::vector<DeviceSpan> events_;
};

// Nanoseconds on this host's steady clock (CLOCK_MONOTONIC on Linux), which every process of
// the host reads alike.
int64_t host_clock_ns();

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
  int64_t started_ns_ = 0;
  std::shared_ptr<DeviceEvent> open_;
  TimedSpans spans_;
};

}  // namespace lrmoe
