#pragma once
// The matrices a grouped GEMM multiplies, numbered 0..count-1: those of one [*, n, k] tensor, or
// those of two tensors one after the other. With sharded expert state a pass multiplies the
// experts its process holds, then those it fetched for the pass (docs/ARCHITECTURE.md,
// "Expert-sharded state"); the bank reads each where it is, so that the held experts are never
// copied beside the fetched ones.

#include <torch/torch.h>

#include <vector>

namespace lrmoe {

// Which matrix of a bank each group multiplies: weight_index[g] for group g, or matrix g where
// the index is empty. Replicas of one expert name the same matrix, so that their groups read it
// where it is instead of from a per-instance copy.
using WeightIndex = std::vector<int64_t>;

// The matrix group g multiplies: weight_index[g], or g where the index is empty.
int64_t matrix_of(const WeightIndex& weight_index, int64_t group);

class WeightBank {
 public:
  // One tensor's matrices (implicit: every tensor of matrices is a bank).
  WeightBank(torch::Tensor matrices);  // NOLINT(google-explicit-constructor)
  // `first`'s matrices, then `second`'s ([0, n, k] or undefined: none); same n, k and dtype.
  WeightBank(torch::Tensor first, torch::Tensor second);

  int64_t count() const { return first_.size(0) + (has_second() ? second_.size(0) : 0); }
  // A matrix's rows (dim 1) or columns (dim 2).
  int64_t size(int64_t dim) const { return first_.size(dim); }
  torch::TensorOptions options() const { return first_.options(); }
  const torch::Tensor& first() const { return first_; }
  // [0, n, k] when the bank has one part.
  torch::Tensor second() const;

  // Matrix m, a view of the part that holds it.
  torch::Tensor matrix(int64_t m) const;
  // [groups, n, k]: the matrix of every group in one tensor, as at::_grouped_mm takes them; the
  // first part itself (no copy) when the bank has one part and the index is empty.
  torch::Tensor per_group(const WeightIndex& weight_index) const;
  // A bank of uninitialised matrices shaped, typed and split into parts as this one.
  WeightBank empty_like() const;

 private:
  bool has_second() const { return second_.defined() && second_.size(0) > 0; }

  torch::Tensor first_;
  torch::Tensor second_;
};

}  // namespace lrmoe
