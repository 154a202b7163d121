#include "core/model/grouped_swiglu.hpp"

#include "core/model/grouped_gemm.hpp"
#include "core/model/swiglu_activation.hpp"

namespace lrmoe {

torch::Tensor grouped_pre_activations(const torch::Tensor& x_rows,
                                      const std::vector<int64_t>& offsets,
                                      const WeightBank& w_gate_up,
                                      const WeightIndex& weight_index) {
  return grouped_mm(x_rows, offsets, w_gate_up, /*transpose_weights=*/true, weight_index);
}

void grouped_swiglu_forward_into(const torch::Tensor& pre_out, const torch::Tensor& out,
                                 const torch::Tensor& row_norm, const torch::Tensor& x_rows,
                                 const std::vector<int64_t>& offsets, const WeightBank& w_gate_up,
                                 const WeightBank& w_down, const WeightIndex& weight_index) {
  if (!slice_tasks_on_host(x_rows)) {
    grouped_mm_out(pre_out, x_rows, offsets, w_gate_up, /*transpose_weights=*/true, weight_index);
    const SwiGLUActivation activation = swiglu_activation(pre_out, row_norm.defined());
    grouped_mm_out(out, activation.hidden, offsets, w_down, /*transpose_weights=*/true,
                   weight_index);
    if (row_norm.defined()) row_norm.copy_(activation.row_norm);
    return;
  }
  // Whole before the tasks, sliced in them: one large block (reused, Note [Host memory reuse])
  // rather than a fresh small one per task, whose pages the C library may hand back and the
  // kernel zero again.
  const torch::Tensor hidden = torch::empty({x_rows.size(0), w_down.size(2)}, x_rows.options());
  for_each_slice(x_rows, offsets, [&](int64_t g, int64_t first, int64_t count) {
    const int64_t m = matrix_of(weight_index, g);
    const torch::Tensor pre = pre_out.narrow(0, first, count);
    const torch::Tensor hidden_rows = hidden.narrow(0, first, count);
    slice_mm_out(pre, x_rows.narrow(0, first, count), w_gate_up, m, /*transpose_weights=*/true);
    swiglu_activation_into(pre, hidden_rows,
                           row_norm.defined() ? row_norm.narrow(0, first, count) : torch::Tensor());
    slice_mm_out(out.narrow(0, first, count), hidden_rows, w_down, m, /*transpose_weights=*/true);
  });
}

torch::Tensor grouped_swiglu_backward(const torch::Tensor& grad_out, const torch::Tensor& x_rows,
                                      const torch::Tensor& pre_activations,
                                      const std::vector<int64_t>& offsets,
                                      const WeightBank& w_gate_up, const WeightBank& w_down,
                                      const WeightIndex& weight_index,
                                      SwiGLUWeightGrads* weight_grads, bool input_grads) {
  if (!slice_tasks_on_host(grad_out)) {
    const auto grad_hidden =
        grouped_mm(grad_out, offsets, w_down, /*transpose_weights=*/false, weight_index);
    // The hidden rows, recomputed in the same pass, are only needed for w_down's gradient.
    const SwiGLUActivationGrad activation = swiglu_activation_backward(
        grad_hidden, pre_activations, /*hidden=*/weight_grads != nullptr);
    if (weight_grads) {
      weight_grads->w_down.add(grad_out, activation.hidden, offsets, weight_index);
      weight_grads->w_gate_up.add(activation.grad_pre, x_rows, offsets, weight_index);
    }
    if (!input_grads) return {};
    return grouped_mm(activation.grad_pre, offsets, w_gate_up, /*transpose_weights=*/false,
                      weight_index);
  }
  const torch::Tensor pre_rows = pre_activations.contiguous();
  const int64_t rows = grad_out.size(0), ffn = w_down.size(2);
  const torch::TensorOptions options = grad_out.options();
  // Whole before the tasks, sliced in them, as in the forward.
  const torch::Tensor grad_hidden = torch::empty({rows, ffn}, options);
  const torch::Tensor grad_pre = torch::empty({rows, 2 * ffn}, options);
  const torch::Tensor hidden = weight_grads ? torch::empty({rows, ffn}, options) : torch::Tensor();
  const torch::Tensor input =
      input_grads ? torch::empty({rows, w_gate_up.size(2)}, options) : torch::Tensor();
  if (weight_grads) {
    weight_grads->w_down.begin_call(offsets, weight_index);
    weight_grads->w_gate_up.begin_call(offsets, weight_index);
  }
  for_each_slice(grad_out, offsets, [&](int64_t g, int64_t first, int64_t count) {
    const int64_t m = matrix_of(weight_index, g);
    auto slice = [&](const torch::Tensor& t) { return t.narrow(0, first, count); };
    const torch::Tensor grad_rows = slice(grad_out), grad_pre_rows = slice(grad_pre);
    const torch::Tensor hidden_rows = weight_grads ? slice(hidden) : torch::Tensor();
    slice_mm_out(slice(grad_hidden), grad_rows, w_down, m, /*transpose_weights=*/false);
    swiglu_activation_backward_into(slice(grad_hidden), slice(pre_rows), grad_pre_rows,
                                    hidden_rows);
    if (weight_grads) {
      weight_grads->w_down.add_group(g, grad_rows, hidden_rows);
      weight_grads->w_gate_up.add_group(g, grad_pre_rows, slice(x_rows));
    }
    if (input_grads)
      slice_mm_out(slice(input), grad_pre_rows, w_gate_up, m, /*transpose_weights=*/false);
  });
  if (weight_grads) {
    weight_grads->w_down.end_call();
    weight_grads->w_gate_up.end_call();
  }
  return input;
}

}  // namespace lrmoe
