#pragma once
// Routed SwiGLU experts over compacted token-expert pairs, with a custom backward.
//
// Pairs arrive sorted by expert, so the pairs of expert e are one contiguous slice
// [off[e], off[e+1]). Forward runs a variable-size grouped GEMM over those slices
// (grouped_gemm.hpp) and scatter-adds the gate-weighted outputs into the tokens. It saves each pair's expert pre-activations and
// ungated output; backward gives every pair its exact gate gradient from them, and runs the
// expert backward (grouped GEMMs again) only for the pairs the PairBackwardPlanner keeps
// (pair_backward_plan.hpp). A pair that is not kept loses both its weight-gradient and its
// input-gradient contributions through the expert.

#include <torch/torch.h>

#include <vector>

#include "core/model/pair_backward_plan.hpp"

namespace lrmoe {

struct ExpertPairs {
  torch::Tensor tokens;                 // [pairs] int64 token index of each pair
  torch::Tensor experts;                // [pairs] int64 expert of each pair, non-decreasing
  std::vector<int64_t> expert_offsets;  // [experts + 1]
};

// Sorts (token, expert) pairs by expert, stably, and computes the slice offsets.
// `gate_order` receives the permutation applied, to reorder the gates the same way.
ExpertPairs compact_pairs_by_expert(const torch::Tensor& pair_tokens, const torch::Tensor& pair_experts,
                                    int64_t num_experts, torch::Tensor* gate_order);

// x: [tokens, hidden]; gates: [pairs] in pair order; w_gate_up: [experts, 2*ffn, hidden];
// w_down: [experts, hidden, ffn]. Returns [tokens, hidden] = sum over a token's pairs of
// gate * expert(x). `planner` may be null (keep every pair).
torch::Tensor routed_experts(const torch::Tensor& x, const torch::Tensor& gates, const ExpertPairs& pairs,
                             const torch::Tensor& w_gate_up, const torch::Tensor& w_down,
                             const PairBackwardPlanner* planner);

}  // namespace lrmoe
