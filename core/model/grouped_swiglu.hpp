#pragma once
// SwiGLU experts applied to rows grouped by instance: rows [off[i], off[i+1]) go through the
// weights of instance i. The activation between the GEMMs is core/model/swiglu_activation.hpp. The
// forward and the two halves of the backward (weight gradients, input gradients) are separate,
// because the pipeline runs them over different sets of pairs.

#include <torch/torch.h>

#include <vector>

#include "core/model/grouped_gemm.hpp"

namespace lrmoe {

// Pre-activations [rows, 2*ffn] of x_rows under w_gate_up [experts, 2*ffn, hidden], group g
// multiplying the matrix weight_index names (core/model/grouped_gemm.hpp).
torch::Tensor grouped_pre_activations(const torch::Tensor& x_rows,
                                      const std::vector<int64_t>& offsets,
                                      const WeightBank& w_gate_up,
                                      const WeightIndex& weight_index = {});
// The forward of the rows in one pass: pre_out [rows, 2*ffn] receives the pre-activations (saved
// for the backward), out [rows, hidden] the output rows and row_norm [rows] (any stride; may be
// undefined) each hidden row's L2 norm. out's rows may be spaced wider than hidden (the forward
// writes them beside a column of their own): BLAS writes any row stride in place. On the CPU's
// slice loop each group's GEMMs and activation run as one task (slice_tasks_on_host); elsewhere as
// three grouped steps.
void grouped_swiglu_forward_into(const torch::Tensor& pre_out, const torch::Tensor& out,
                                 const torch::Tensor& row_norm, const torch::Tensor& x_rows,
                                 const std::vector<int64_t>& offsets, const WeightBank& w_gate_up,
                                 const WeightBank& w_down, const WeightIndex& weight_index = {});

// The experts' weight gradients, summed over the groups (instances) of every call that adds to
// them.
struct SwiGLUWeightGrads {
  WeightGradSum w_gate_up;  // [experts, 2*ffn, hidden]
  WeightGradSum w_down;     // [experts, hidden, ffn]
};

// Backward of the expert output rows: grad_out [rows, hidden] (already gate- and weight-scaled),
// with the rows' pre-activations and inputs. Adds the weight gradients into `weight_grads` when
// given (x_rows is only read for them and may be undefined without them); returns the input
// gradient [rows, hidden] when input_grads, else an undefined tensor. On the CPU's slice loop
// each group's steps run as one task, as in the forward.
torch::Tensor grouped_swiglu_backward(const torch::Tensor& grad_out, const torch::Tensor& x_rows,
                                      const torch::Tensor& pre_activations,
                                      const std::vector<int64_t>& offsets,
                                      const WeightBank& w_gate_up, const WeightBank& w_down,
                                      const WeightIndex& weight_index,
                                      SwiGLUWeightGrads* weight_grads, bool input_grads);

}  // namespace lrmoe
