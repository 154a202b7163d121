#pragma once
// Measures the wall time autograd spends in the backward of one module.
//
// wrap_output(y) and wrap_input(x) are identity functions. In backward, the one on the module's
// output runs first (starting the clock) and the one on its input runs last (stopping it): autograd
// on CPU runs a module's nodes between the two, since they were created between them.

#include <torch/torch.h>

#include <memory>

#include "core/device/span_timer.hpp"

namespace lrmoe {

class BackwardStopwatch {
 public:
  torch::Tensor wrap_input(const torch::Tensor& x);
  torch::Tensor wrap_output(const torch::Tensor& y);
  // The spans timed since the last call, unread.
  TimedSpans take();

  struct State {
    SpanTimer timer;  // Note [Device timing]
  };

 private:
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace lrmoe
