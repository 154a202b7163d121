#pragma once
// Selection policy: in the backward phase, keep the pairs whose expert backward work is done.
// An expert's quota bounds its kept pairs over all of its pairs on every rank. A kept pair's
// contribution to the expert's weight and input gradients is scaled by its weight: 1 for a
// biased top-quota choice, 1/p for unbiased sampling with keep probability p. The gate (router)
// gradient of every pair stays exact whatever is selected (Note [Gradients of dropped pairs] in
// docs/notes.md).

#include "lrmoe/policy.hpp"

namespace lrmoe {

struct Selection {
  at::Tensor kept;     // [kept] int64 indices into the pair order, strictly increasing
  at::Tensor weights;  // [kept] float32; undefined means all 1
};

class SelectionPolicy : public Policy {
 public:
  virtual Selection select(const PairBatch& pairs, const at::Tensor& scores) = 0;
};

}  // namespace lrmoe
