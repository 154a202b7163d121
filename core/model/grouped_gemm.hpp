#pragma once
// Variable-size grouped GEMMs over contiguous per-expert slices of a pair-major matrix: rows
// [off[e], off[e+1]) belong to expert e. No padding to a capacity.
//
// Two kernels compute the same products (Note [Grouped GEMM kernels] in docs/notes.md): a loop
// of one GEMM per non-empty slice, and at::_grouped_mm where the LibTorch has it (one call for
// every slice). The process uses one, chosen once at start (core/model/grouped_gemm_choice.hpp).

#include <c10/util/FunctionRef.h>
#include <torch/torch.h>

#include <vector>

#include "core/model/weight_bank.hpp"

namespace lrmoe {

enum class GroupedGemmKernel { SliceLoop, GroupedMm };

const char* kernel_name(GroupedGemmKernel kernel);  // "slice-loop", "grouped-mm"

// The kernel every grouped GEMM of this process uses; SliceLoop until set.
GroupedGemmKernel grouped_gemm_kernel();
void set_grouped_gemm_kernel(GroupedGemmKernel kernel);
// The kernels this LibTorch has: slice-loop always, grouped-mm from 2.9 on.
std::vector<GroupedGemmKernel> available_grouped_gemm_kernels();

// input[slice g] @ W[w(g)]^T (transpose_weights) or input[slice g] @ W[w(g)], one row per input
// row, w(g) from weight_index. input: [rows, k]; weights: matrices [n, k] (transposed) or [k, n];
// offsets: groups + 1 row offsets, offsets[0] = 0, offsets.back() = rows. Returns [rows, n] in
// input's dtype.
torch::Tensor grouped_mm(const torch::Tensor& input, const std::vector<int64_t>& offsets,
                         const WeightBank& weights, bool transpose_weights,
                         const WeightIndex& weight_index = {});
// The same into `out` ([rows, n], rows contiguous, e.g. a row range of a larger tensor).
void grouped_mm_out(const torch::Tensor& out, const torch::Tensor& input,
                    const std::vector<int64_t>& offsets, const WeightBank& weights,
                    bool transpose_weights, const WeightIndex& weight_index = {});

// Whether grouped work on tensors like `like` runs as one task per slice on the host's threads
// (the slice-loop kernel on the CPU). Then a chain of steps on one slice (both SwiGLU GEMMs and
// the activation between them) can run as one task: its rows stay in the core's cache and the
// threads meet once per chain instead of once per step (core/model/grouped_swiglu.hpp).
bool slice_tasks_on_host(const torch::Tensor& like);

// Calls fn(g, first_row, row_count) for every group with rows, each group on one thread: on the
// CPU the intra-op threads take the groups largest first, each taking the next when it is done,
// so that one large group does not leave a thread idle; elsewhere one after another. Every
// group's result is computed by one thread alone, so results do not depend on the thread count.
void for_each_slice(const torch::Tensor& like, const std::vector<int64_t>& offsets,
                    c10::function_ref<void(int64_t, int64_t, int64_t)> fn);

// out = input @ W[matrix]^T (transpose_weights) or input @ W[matrix], for one group's rows.
void slice_mm_out(const torch::Tensor& out, const torch::Tensor& input, const WeightBank& weights,
                  int64_t matrix, bool transpose_weights);

// grad_weights[e] = grad_out[slice e]^T @ input[slice e]; experts without rows get zeros.
// Returns a tensor shaped and typed like `like_weights` ([experts, n, k]).
torch::Tensor grouped_weight_grad(const torch::Tensor& grad_out, const torch::Tensor& input,
                                  const std::vector<int64_t>& offsets,
                                  const torch::Tensor& like_weights);

// A bank's gradient summed over every group that multiplied one of its matrices (an expert's
// owner and replicas, over several calls): the first group writes a matrix's gradient, the
// others add to it, and matrices no group wrote are zeroed by finish(). The gradient is a bank
// split into parts as the weights are, each part its own tensor.
class WeightGradSum {
 public:
  explicit WeightGradSum(const WeightBank& like_weights);
  // Adds grad_out[slice g]^T @ input[slice g] to matrix w(g) for every group with rows.
  void add(const torch::Tensor& grad_out, const torch::Tensor& input,
           const std::vector<int64_t>& offsets, const WeightIndex& weight_index);
  // The same, group by group from slice tasks (for_each_slice) that compute more than this
  // product: begin_call before the tasks, add_group from group g's task with its rows,
  // end_call after every task. Slice-loop kernel only.
  void begin_call(const std::vector<int64_t>& offsets, const WeightIndex& weight_index);
  void add_group(int64_t g, const torch::Tensor& grad_out_rows, const torch::Tensor& input_rows);
  void end_call();
  WeightBank finish();

 private:
  WeightBank grad_;
  std::vector<char> written_;  // [matrices]
  // The call in progress: its groups' matrices, whether each group is the first of the call to
  // write its matrix (a matrix named twice would otherwise be written by two threads at once),
  // and the later groups' products, summed in by end_call.
  WeightIndex call_matrices_;
  std::vector<char> first_in_call_;
  std::vector<torch::Tensor> later_;
};

}  // namespace lrmoe
