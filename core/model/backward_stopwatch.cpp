#include "core/model/backward_stopwatch.hpp"

#include <torch/csrc/autograd/custom_function.h>

namespace lrmoe {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct StateHolder : torch::CustomClassHolder {
  std::shared_ptr<BackwardStopwatch::State> state;
};

template <bool kStarts>
class StopwatchMark : public torch::autograd::Function<StopwatchMark<kStarts>> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               c10::intrusive_ptr<StateHolder> holder) {
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(holder));
    return x.view_as(x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto holder =
        c10::static_intrusive_pointer_cast<StateHolder>(ctx->saved_data["state"].toCapsule());
    if (kStarts) {
      holder->state->timer.start(grads[0].device());
    } else {
      holder->state->timer.stop();
    }
    return {grads[0], torch::Tensor()};
  }
};

c10::intrusive_ptr<StateHolder> hold(const std::shared_ptr<BackwardStopwatch::State>& state) {
  auto holder = c10::make_intrusive<StateHolder>();
  holder->state = state;
  return holder;
}

}  // namespace

torch::Tensor BackwardStopwatch::wrap_input(const torch::Tensor& x) {
  if (!torch::GradMode::is_enabled() || !x.requires_grad()) return x;
  return StopwatchMark<false>::apply(x, hold(state_));
}

torch::Tensor BackwardStopwatch::wrap_output(const torch::Tensor& y) {
  if (!torch::GradMode::is_enabled() || !y.requires_grad()) return y;
  return StopwatchMark<true>::apply(y, hold(state_));
}

TimedSpans BackwardStopwatch::take() {
  return state_->timer.take();
}

}  // namespace lrmoe
