#pragma once
// The SwiGLU activation between an expert's two GEMMs, hidden = silu(a) * b of pre-activations
// [a | b], and its backward. On the CPU each is one pass over the rows, every output written
// once: the composite of LibTorch operators it replaces made eleven passes over [rows, ffn]
// tensors in the backward, a third of the MoE layer's non-GEMM time. Elsewhere (CUDA) it is
// that composite. Values are computed in fp32 (fp64 for fp64 tensors) and stored in the input's
// dtype.

#include <torch/torch.h>

namespace lrmoe {

struct SwiGLUActivation {
  torch::Tensor hidden;    // [rows, ffn] silu(a) * b, in the pre-activations' dtype
  torch::Tensor row_norm;  // [rows] L2 norm of each stored hidden row; undefined unless asked for
};

// pre_activations: [rows, 2*ffn] = [a | b].
SwiGLUActivation swiglu_activation(const torch::Tensor& pre_activations, bool row_norm);

struct SwiGLUActivationGrad {
  torch::Tensor grad_pre;  // [rows, 2*ffn] = [d/da | d/db]
  torch::Tensor hidden;    // [rows, ffn] silu(a) * b again, undefined unless asked for
};

// grad_hidden: [rows, ffn], the gradient at hidden; pre_activations as in the forward.
SwiGLUActivationGrad swiglu_activation_backward(const torch::Tensor& grad_hidden,
                                                const torch::Tensor& pre_activations, bool hidden);

// The CPU passes into given tensors, for one expert's rows inside a slice task
// (core/model/grouped_swiglu.hpp): pre [rows, 2*ffn], hidden [rows, ffn] and grad_pre, rows
// contiguous; row_norm [rows] of any stride (a column beside the output rows), and hidden in the
// backward, may be undefined.
void swiglu_activation_into(const torch::Tensor& pre, const torch::Tensor& hidden,
                            const torch::Tensor& row_norm);
void swiglu_activation_backward_into(const torch::Tensor& grad_hidden, const torch::Tensor& pre,
                                     const torch::Tensor& grad_pre, const torch::Tensor& hidden);

}  // namespace lrmoe
