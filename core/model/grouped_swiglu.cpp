#include "core/model/grouped_swiglu.hpp"

#include "core/model/grouped_gemm.hpp"

namespace lrmoe {

torch::Tensor grouped_pre_activations(const torch::Tensor& x_rows,
                                      const std::vector<int64_t>& offsets,
                                      const torch::Tensor& w_gate_up) {
  return grouped_mm(x_rows, offsets, w_gate_up, /*transpose_weights=*/true);
}

torch::Tensor swiglu_hidden(const torch::Tensor& pre_activations) {
  const int64_t ffn = pre_activations.size(1) / 2;
  return torch::silu(pre_activations.narrow(1, 0, ffn)) * pre_activations.narrow(1, ffn, ffn);
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
  const int64_t ffn = pre_activations.size(1) / 2;
  auto a = pre_activations.narrow(1, 0, ffn);
  auto b = pre_activations.narrow(1, ffn, ffn);
  auto sig = torch::sigmoid(a);
  auto silu_a = a * sig;
  if (weight_grads) grads.w_down = grouped_weight_grad(grad_out, silu_a * b, offsets, w_down);
  auto grad_hidden = grouped_mm(grad_out, offsets, w_down, /*transpose_weights=*/false);
  // d silu(a) / da = sig * (1 + a (1 - sig))
  auto grad_a = grad_hidden * b * sig * (1 + a * (1 - sig));
  auto grad_pre = torch::cat({grad_a, grad_hidden * silu_a}, 1);
  if (weight_grads) grads.w_gate_up = grouped_weight_grad(grad_pre, x_rows, offsets, w_gate_up);
  if (input_grads)
    grads.input = grouped_mm(grad_pre, offsets, w_gate_up, /*transpose_weights=*/false);
  return grads;
}

}  // namespace lrmoe
