#include "core/device/span_timer.hpp"

namespace lrmoe {

int64_t host_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double TimedSpans::read(bool* waited) const {
  double seconds = host_seconds_;
  for (const DeviceSpan& span : events_) {
    if (waited && !event_reached(*span.to)) *waited = true;
    seconds += elapsed_seconds(*span.from, *span.to);
  }
  return seconds;
}

std::vector<SpanInterval> TimedSpans::intervals() const {
  std::vector<SpanInterval> spans;
  for (const auto& [start, end] : host_spans_)
    spans.push_back({start, 1e-9 * static_cast<double>(end - start)});
  for (const DeviceSpan& span : events_)
    spans.push_back({span.issued_ns, elapsed_seconds(*span.from, *span.to)});
  return spans;
}

TimedSpans& TimedSpans::operator+=(const TimedSpans& other) {
  host_seconds_ += other.host_seconds_;
  host_spans_.insert(host_spans_.end(), other.host_spans_.begin(), other.host_spans_.end());
  events_.insert(events_.end(), other.events_.begin(), other.events_.end());
  return *this;
}

void SpanTimer::start(const torch::Device& device) {
  device_ = device;
  started_ns_ = host_clock_ns();
  if (device.is_cuda()) open_ = record_event(device);
}

void SpanTimer::stop() {
  if (!device_) return;
  if (device_->is_cuda()) {
    spans_.events_.push_back({started_ns_, std::move(open_), record_event(*device_)});
  } else {
    const int64_t now = host_clock_ns();
    spans_.host_seconds_ += 1e-9 * static_cast<double>(now - started_ns_);
    spans_.host_spans_.emplace_back(started_ns_, now);
  }
  device_.reset();
}

TimedSpans SpanTimer::take() {
  return std::exchange(spans_, TimedSpans{});
}

}  // namespace lrmoe
