#include "core/device/host_readback.hpp"

namespace lrmoe {

HostReadback::HostReadback(const torch::Tensor& values) {
  if (!values.is_cuda()) {
    host_ = values;
    return;
  }
  // A non-blocking copy to the CPU lands in pinned memory and returns at once; the event marks
  // its end on the stream it was queued on.
  host_ = values.to(torch::kCPU, /*non_blocking=*/true);
  copied_ = record_event(values.device());
}

torch::Tensor HostReadback::read(bool* waited) const {
  if (copied_ && !event_reached(*copied_)) {
    if (waited) *waited = true;
    wait_for(*copied_);
  }
  return host_;
}

}  // namespace lrmoe
