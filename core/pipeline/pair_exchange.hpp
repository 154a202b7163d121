#pragma once
// The one seam where pair rows move between ranks: the all-to-all-v of dispatch (home rank to
// expert instance) and its inverse (combine, and the return of input gradients). With every
// logical rank in this process the move is a permutation; a process-group implementation
// replaces it with c10d all-to-all-v without touching the pipeline.

#include <torch/torch.h>

#include "core/pipeline/pair_layout.hpp"

namespace lrmoe {

class PairExchange {
 public:
  virtual ~PairExchange() = default;
  // [pairs, width] rows in pair order at their home ranks -> rows in destination order.
  virtual torch::Tensor dispatch(const torch::Tensor& home_rows, const PairLayout& layout) = 0;
  // [pairs, width] rows in destination order -> rows in pair order at their home ranks.
  virtual torch::Tensor combine(const torch::Tensor& destination_rows, const PairLayout& layout) = 0;
};

// All logical ranks live in this process.
class LocalExchange : public PairExchange {
 public:
  torch::Tensor dispatch(const torch::Tensor& home_rows, const PairLayout& layout) override;
  torch::Tensor combine(const torch::Tensor& destination_rows, const PairLayout& layout) override;
};

}  // namespace lrmoe
