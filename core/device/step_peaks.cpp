#include "core/device/step_peaks.hpp"

#include <algorithm>

#include "core/device/caching_host_allocator.hpp"
#include "core/device/cuda_runtime.hpp"

namespace lrmoe {

namespace {

// The allocator's peak since the last call, restarting it: the CUDA caching allocator's bytes
// allocated, or on the CPU the caching host allocator's bytes its live blocks asked for.
std::optional<int64_t> take_peak(const torch::Device& device) {
  if (device.is_cpu()) return take_host_peak_requested();
  const std::optional<int64_t> peak = peak_allocated_bytes(device);
  reset_peak_allocated_bytes(device);
  return peak;
}

}  // namespace

StepPeaks::StepPeaks(const torch::Device& device) : device_(device) {
  take_peak(device_);
}

void StepPeaks::lap(int64_t MeasuredPeaks::*phase) {
  const std::optional<int64_t> peak = take_peak(device_);
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
