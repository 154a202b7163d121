#include "core/model/grouped_swiglu.hpp"

#include "core/model/grouped_gemm.hpp"
#include "core/model/swiglu_activation.hpp"

namespace lrmoe {

torch::Tensor grouped_pre_activations(const torch::Tensor& x_rows,
                                      const std::vector<int64_t>& offsets,
                                      const torch::Tensor& w_gate_up) {
  return grouped_mm(x_rows, offsets, w_gate_up, /*transpose_weights=*/true);
}

torch::Tensor grouped_output(const torch::Tensor& hidden, const std::vector<int64_t>& offsets,
                             const torch::Tensor& w_down) {
  return grouped_mm(hidden, offsets, w_down, /*transpose_weights=*/true);
}

GroupedSwiGLUGrads grouped_swiglu_backward(const torch::Tensor& grad_out,
                                           const torch::Tensor& x_rows,
                                           const torch::Tensor& pre_activations,
                                           const std::vector<int64_t>& offsets,
                                           const torch::Tensor& w_gate_up,
                                           const torch::Tensor& w_down, bool weight_grads,
                                           bool input_grads) {
  GroupedSwiGLUGrads grads;
  const auto grad_hidden = grouped_mm(grad_out, offsets, w_down, /*transpose_weights=*/false);
  // The hidden rows, recomputed in the same pass, are only needed for w_down's gradient.
  const SwiGLUActivationGrad activation =
      swiglu_activation_backward(grad_hidden, pre_activations, /*hidden=*/weight_grads);
  const torch::Tensor& grad_pre = activation.grad_pre;
  if (weight_grads) {
    grads.w_down = grouped_weight_grad(grad_out, activation.hidden, offsets, w_down);
    grads.w_gate_up = grouped_weight_grad(grad_pre, x_rows, offsets, w_gate_up);
  }
  if (input_grads)
    grads.input = grouped_mm(grad_pre, offsets, w_gate_up, /*transpose_weights=*/false);
  return grads;
}

}  // namespace lrmoe
