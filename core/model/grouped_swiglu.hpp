#pragma once
// SwiGLU experts applied to rows grouped by instance: rows [off[i], off[i+1]) go through the
// weights of instance i. The activation between the GEMMs is core/model/swiglu_activation.hpp. The
// forward and the two halves of the backward (weight gradients, input gradients) are separate,
// because the pipeline runs them over different sets of pairs.

#include <torch/torch.h>

#include <vector>

namespace lrmoe {

// Pre-activations [rows, 2*ffn] of x_rows under w_gate_up [instances, 2*ffn, hidden].
torch::Tensor grouped_pre_activations(const torch::Tensor& x_rows,
                                      const std::vector<int64_t>& offsets,
                                      const torch::Tensor& w_gate_up);
// Output rows [rows, hidden] of hidden rows under w_down [instances, hidden, ffn].
torch::Tensor grouped_output(const torch::Tensor& hidden, const std::vector<int64_t>& offsets,
                             const torch::Tensor& w_down);

struct GroupedSwiGLUGrads {
  torch::Tensor w_gate_up;  // [instances, 2*ffn, hidden], undefined unless asked for
  torch::Tensor w_down;     // [instances, hidden, ffn], undefined unless asked for
  torch::Tensor input;      // [rows, hidden], undefined unless asked for
};

// Backward of the expert output rows: grad_out [rows, hidden] (already gate- and
// weight-scaled), with the rows' pre-activations and inputs (x_rows is only read for weight
// gradients and may be undefined without them).
GroupedSwiGLUGrads grouped_swiglu_backward(const torch::Tensor& grad_out,
                                           const torch::Tensor& x_rows,
                                           const torch::Tensor& pre_activations,
                                           const std::vector<int64_t>& offsets,
                                           const torch::Tensor& w_gate_up,
                                           const torch::Tensor& w_down, bool weight_grads,
                                           bool input_grads);

}  // namespace lrmoe
