#include "core/device/span_timer.hpp"

namespace lrmoe {

void SpanTimer::start(const torch::Device& device) {
  device_ = device;
  if (device.is_cuda()) {
    open_ = record_event(device);
  } else {
    started_ = std::chrono::steady_clock::now();
  }
}

void SpanTimer::stop() {
  if (!device_) return;
  if (device_->is_cuda()) {
    spans_.emplace_back(std::move(open_), record_event(*device_));
  } else {
    host_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }
  device_.reset();
}

double SpanTimer::take_seconds() {
  double seconds = host_seconds_;
  host_seconds_ = 0;
  if (!spans_.empty() && !event_reached(*spans_.back().second)) ++stalls_;
  for (const auto& [from, to] : spans_) seconds += elapsed_seconds(*from, *to);
  spans_.clear();
  return seconds;
}

}  // namespace lrmoe
