#include "core/device/step_peaks.hpp"

#include <algorithm>

#include "core/device/cuda_runtime.hpp"

namespace lrmoe {

StepPeaks::StepPeaks(const torch::Device& device) : device_(device) {
  reset_peak_allocated_bytes(device_);
}

void StepPeaks::lap(int64_t MeasuredPeaks::*phase) {
  const std::optional<int64_t> peak = peak_allocated_bytes(device_);
  reset_peak_allocated_bytes(device_);
  if (!peak) return;
  if (!peaks_) peaks_ = MeasuredPeaks{};
  if (phase) (*peaks_).*phase = std::max((*peaks_).*phase, *peak);
  peaks_->step = std::max(peaks_->step, *peak);
}

void StepPeaks::end_forward() {
  lap(&MeasuredPeaks::forward);
}

void StepPeaks::end_backward() {
  lap(&MeasuredPeaks::backward);
}

std::optional<MeasuredPeaks> StepPeaks::finish() {
  lap(nullptr);
  return peaks_;
}

}  // namespace lrmoe
