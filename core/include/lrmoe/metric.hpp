#pragma once
// Metric policy: in the backward phase, estimate each pair's contribution to its expert's
// weight update. For a SwiGLU expert the down-projection gradient of a pair has Frobenius norm
// exactly g * |d| * |h|; g, g * |d| and g * |d| * |x| are cheaper proxies.

#include "lrmoe/policy.hpp"

namespace lrmoe {

class MetricPolicy : public Policy {
 public:
  // Returns [pairs] float32 scores, >= 0, larger meaning a larger contribution.
  virtual at::Tensor score(const PairBatch& pairs) = 0;
};

}  // namespace lrmoe
