#pragma once
// Variable-size grouped GEMMs over contiguous per-expert slices of a pair-major matrix: rows
// [off[e], off[e+1]) belong to expert e. No padding to a capacity.
//
// Two kernels compute the same products (Note [Grouped GEMM kernels] in docs/notes.md): a loop
// of one GEMM per non-empty slice, and at::_grouped_mm where the LibTorch has it (one call for
// every slice). The process uses one, chosen once at start (core/model/grouped_gemm_choice.hpp).

#include <torch/torch.h>

#include <vector>

namespace lrmoe {

enum class GroupedGemmKernel { SliceLoop, GroupedMm };

const char* kernel_name(GroupedGemmKernel kernel);  // "slice-loop", "grouped-mm"

// The kernel every grouped GEMM of this process uses; SliceLoop until set.
GroupedGemmKernel grouped_gemm_kernel();
void set_grouped_gemm_kernel(GroupedGemmKernel kernel);
// The kernels this LibTorch has: slice-loop always, grouped-mm from 2.9 on.
std::vector<GroupedGemmKernel> available_grouped_gemm_kernels();

// Which matrix of a weights tensor each group multiplies: weight_index[g] for group g, or
// weights[g] where the index is empty. Replicas of one expert name the same matrix, so that
// their groups read it where it is instead of from a per-instance copy.
using WeightIndex = std::vector<int64_t>;

// input[slice g] @ W[w(g)]^T (transpose_weights) or input[slice g] @ W[w(g)], one row per input
// row, w(g) from weight_index. input: [rows, k]; weights: [*, n, k] (transposed) or [*, k, n];
// offsets: groups + 1 row offsets, offsets[0] = 0, offsets.back() = rows. Returns [rows, n] in
// input's dtype.
torch::Tensor grouped_mm(const torch::Tensor& input, const std::vector<int64_t>& offsets,
                         const torch::Tensor& weights, bool transpose_weights,
                         const WeightIndex& weight_index = {});
// The same into `out` ([rows, n], rows contiguous, e.g. a row range of a larger tensor).
void grouped_mm_out(const torch::Tensor& out, const torch::Tensor& input,
                    const std::vector<int64_t>& offsets, const torch::Tensor& weights,
                    bool transpose_weights, const WeightIndex& weight_index = {});

// grad_weights[e] = grad_out[slice e]^T @ input[slice e]; experts without rows get zeros.
// Returns a tensor shaped and typed like `like_weights` ([experts, n, k]).
torch::Tensor grouped_weight_grad(const torch::Tensor& grad_out, const torch::Tensor& input,
                                  const std::vector<int64_t>& offsets,
                                  const torch::Tensor& like_weights);

// A weights tensor's gradient summed over every group that multiplied one of its matrices (an
// expert's owner and replicas, over several calls): the first group writes a matrix's gradient,
// the others add to it, and matrices no group wrote are zeroed by finish().
class WeightGradSum {
 public:
  explicit WeightGradSum(const torch::Tensor& like_weights);  // [*, n, k]
  // Adds grad_out[slice g]^T @ input[slice g] to matrix w(g) for every group with rows.
  void add(const torch::Tensor& grad_out, const torch::Tensor& input,
           const std::vector<int64_t>& offsets, const WeightIndex& weight_index);
  torch::Tensor finish();

 private:
  torch::Tensor grad_;
  std::vector<char> written_;  // [matrices]
};

}  // namespace lrmoe
