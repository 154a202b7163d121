#include "core/device/span_timer.hpp"

namespace lrmoe {

double TimedSpans::read(bool* waited) const {
  double seconds = host_seconds_;
  for (const auto& [from, to] : events_) {
    if (waited && !event_reached(*to)) *waited = true;
    seconds += elapsed_seconds(*from, *to);
  }
  return seconds;
}

TimedSpans& TimedSpans::operator+=(const TimedSpans& other) {
  host_seconds_ += other.host_seconds_;
  events_.insert(events_.end(), other.events_.begin(), other.events_.end());
  return *this;
}

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
    spans_.events_.emplace_back(std::move(open_), record_event(*device_));
  } else {
    spans_.host_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }
  device_.reset();
}

TimedSpans SpanTimer::take() {
  return std::exchange(spans_, TimedSpans{});
}

}  // namespace lrmoe
