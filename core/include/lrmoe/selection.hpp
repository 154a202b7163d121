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

// Optional, for scalable planning (Note [Scalable planning] in docs/notes.md): a selection that
// keeps, per expert, the kept_count(pairs, quota) highest-scored of its pairs (equal scores: the
// earlier pair in pair order) and weighs each of them kept_weight(pairs, kept). Its choice
// follows from one threshold score per expert, which the processes agree on from summed
// histograms (Note [Scalable selection]) without seeing another process's pairs. Such a policy
// also implements select(), which the exact plan calls and which must keep the same pairs with
// the same weights. Found by dynamic_cast: a selection without it runs only in the exact plan.
class RankedSelectionPolicy : public SelectionPolicy {
 public:
  // How many of an expert's `pairs` pairs (over every process) it keeps under `quota`: at most
  // `pairs`.
  virtual int64_t kept_count(int64_t pairs, int64_t quota) const = 0;
  // The weight of each kept pair of an expert that keeps `kept` > 0 of its `pairs`; 1 leaves the
  // gradient unweighted.
  virtual float kept_weight(int64_t pairs, int64_t kept) const = 0;
};

}  // namespace lrmoe
