#pragma once
// The allocator's measured peaks over one training step, by phase: the forward passes (model
// and loss), the backward passes, and the whole step (the optimizer's update and the gradient
// sum included). On CUDA the caching allocator's bytes allocated; on the CPU the caching host
// allocator's live bytes (tensors of 256 KiB and more; core/device/caching_host_allocator.hpp)
// when the program installed it. They are recorded beside the modeled liveness timeline's peak
// (Note [Device timing], Note [Memory model] in docs/notes.md). The statistics are host-side
// counters, so reading them waits for nothing on the device.

#include <torch/torch.h>

#include <cstdint>
#include <optional>

namespace lrmoe {

// Bytes allocated at the peak of each phase of a step, on one process's device.
struct MeasuredPeaks {
  int64_t step = 0;
  int64_t forward = 0;   // the largest over the step's micro-batches
  int64_t backward = 0;  // likewise
};

// Brackets the phases of one step: construct it at the step's start, call end_forward and
// end_backward around each micro-batch's phases, then finish. Without a caching allocator (the
// CPU in the tests) it measures nothing.
class StepPeaks {
 public:
  explicit StepPeaks(const torch::Device& device);
  void end_forward();
  void end_backward();
  // The step's peaks; none where the device has no caching allocator.
  std::optional<MeasuredPeaks> finish();

 private:
  // The peak since the last lap, folded into `phase` (when given) and the step; restarts the
  // allocator's peak.
  void lap(int64_t MeasuredPeaks::*phase);

  torch::Device device_;
  std::optional<MeasuredPeaks> peaks_;
};

}  // namespace lrmoe
