#include "core/model/grouped_swiglu.hpp"

#include "core/model/grouped_gemm.hpp"
#include "core/model/swiglu_activation.hpp"

namespace lrmoe {

torch::Tensor grouped_pre_activations(const torch::Tensor& x_rows,
                                      const std::vector<int64_t>& offsets,
                                      const torch::Tensor& w_gate_up,
                                      const WeightIndex& weight_index) {
  return grouped_mm(x_rows, offsets, w_gate_up, /*transpose_weights=*/true, weight_index);
}

void grouped_output_into(const torch::Tensor& out, const torch::Tensor& hidden,
                         const std::vector<int64_t>& offsets, const torch::Tensor& w_down,
                         const WeightIndex& weight_index) {
  // BLAS writes an output of any row stride in place (ldc), so no copy is made for it.
  grouped_mm_out(out, hidden, offsets, w_down, /*transpose_weights=*/true, weight_index);
}

torch::Tensor grouped_swiglu_backward(const torch::Tensor& grad_out, const torch::Tensor& x_rows,
                                      const torch::Tensor& pre_activations,
                                      const std::vector<int64_t>& offsets,
                                      const torch::Tensor& w_gate_up, const torch::Tensor& w_down,
                                      const WeightIndex& weight_index,
                                      SwiGLUWeightGrads* weight_grads, bool input_grads) {
  const auto grad_hidden =
      grouped_mm(grad_out, offsets, w_down, /*transpose_weights=*/false, weight_index);
  // The hidden rows, recomputed in the same pass, are only needed for w_down's gradient.
  const SwiGLUActivationGrad activation =
      swiglu_activation_backward(grad_hidden, pre_activations, /*hidden=*/weight_grads != nullptr);
  if (weight_grads) {
    weight_grads->w_down.add(grad_out, activation.hidden, offsets, weight_index);
    weight_grads->w_gate_up.add(activation.grad_pre, x_rows, offsets, weight_index);
  }
  if (!input_grads) return {};
  return grouped_mm(activation.grad_pre, offsets, w_gate_up, /*transpose_weights=*/false,
                    weight_index);
}

}  // namespace lrmoe
