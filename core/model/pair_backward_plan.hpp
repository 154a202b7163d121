#pragma once
// The one place where backward work per token-expert pair is decided.
//
// In the backward pass of an MoE layer every routed pair has its exact gate (router) gradient.
// Its expert-side backward (weight gradients and input gradient through the expert) is done only
// for the pairs a PairBackwardPlanner keeps, each scaled by a weight. Without a planner every
// pair is kept with weight 1: exact backpropagation. The LRMoE backward phase (metric, selection
// within quotas, routing of kept pairs) plugs in here.

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace lrmoe {

// Signals available for every pair, in the layer's expert-sorted pair order.
struct PairSignals {
  torch::Tensor experts;        // [pairs] int64, non-decreasing
  torch::Tensor gates;          // [pairs] gate of the pair
  torch::Tensor upstream_norm;  // [pairs] |d|: norm of the loss gradient at the pair's token
  torch::Tensor input_norm;     // [pairs] |x|: norm of the token's input to the expert
  torch::Tensor hidden_norm;    // [pairs] |h|: norm of the expert's hidden activation
  std::vector<int64_t> expert_offsets;  // [experts + 1]: pairs of expert e are [off[e], off[e+1])
};

struct PairBackwardPlan {
  torch::Tensor kept;     // [kept] int64 indices into the pair order, increasing
  torch::Tensor weights;  // [kept] scale of each kept pair's contribution; undefined: all 1
};

using PairBackwardPlanner = std::function<PairBackwardPlan(const PairSignals&)>;

}  // namespace lrmoe
