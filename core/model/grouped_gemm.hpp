#pragma once
// Variable-size grouped GEMMs over contiguous per-expert slices of a pair-major matrix: rows
// [off[e], off[e+1]) belong to expert e. One GEMM per non-empty expert; no padding to a capacity.

#include <torch/torch.h>

#include <vector>

namespace lrmoe {

// out[slice e] = input[slice e] @ W[e]^T (transpose_weights) or input[slice e] @ W[e].
// weights: [experts, rows, cols]. out must be preallocated with the right width.
void grouped_mm(const torch::Tensor& input, const std::vector<int64_t>& offsets,
                const torch::Tensor& weights, bool transpose_weights, torch::Tensor& out);

// grad_weights[e] = grad_out[slice e]^T @ input[slice e]; experts without rows get zeros.
torch::Tensor grouped_weight_grad(const torch::Tensor& grad_out, const torch::Tensor& input,
                                  const std::vector<int64_t>& offsets,
                                  const torch::Tensor& like_weights);

}  // namespace lrmoe
