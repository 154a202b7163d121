#pragma once
// Routed SwiGLU experts over compacted token-expert pairs, with a custom backward.
//
// Forward: each computed pair's input row moves from its home rank to its instance
// (PairExchange::dispatch, in destination order), a variable-size grouped GEMM runs over each
// instance's contiguous slice (grouped_gemm.hpp) with that instance's copy of its expert's
// weights, and the expert outputs come back home (combine), where they are gate-weighted and
// summed into their tokens. Every pair's ungated output stays at home, so backward gives every
// pair its exact gate gradient (Note [Gradients of dropped pairs] in docs/notes.md). The expert
// backward runs only for the pairs the pipeline keeps (expert_pipeline.hpp), each scaled by its
// weight, on the instance the backward routing chose; replica weight gradients are summed into
// their expert. A dropped pair loses its weight-gradient contribution, and its input gradient
// through the expert too unless [policies] dropped_pair_keeps = "input_grad".

#include <torch/torch.h>

#include <functional>

#include <memory>
#include <vector>

#include "core/model/fetched_experts.hpp"
#include "core/pipeline/expert_pipeline.hpp"

namespace lrmoe {

struct ExpertPairs {
  torch::Tensor tokens;                 // [pairs] int64 token index of each pair
  torch::Tensor experts;                // [pairs] int64 expert of each pair, non-decreasing
  std::vector<int64_t> expert_offsets;  // [experts + 1]
};

// Sorts (token, expert) pairs by expert, stably, and computes the slice offsets (Note [Pair
// order]).
// `gate_order` receives the permutation applied, to reorder the gates the same way.
ExpertPairs compact_pairs_by_expert(const torch::Tensor& pair_tokens,
                                    const torch::Tensor& pair_experts, int64_t num_experts,
                                    torch::Tensor* gate_order);

// The pass of a single rank with one instance per expert, keeping every pair in backward: the
// exact layer, used without a pipeline (evaluation, reference tests).
std::shared_ptr<const ForwardPass> single_rank_pass(const ExpertPairs& pairs, int64_t num_experts);

// x: [tokens, hidden]; gates and tokens: [pairs] the computed pairs in expert order, as
// `forward` describes them; w_gate_up: [held, 2*ffn, hidden]; w_down: [held, hidden, ffn]; and,
// with sharded expert state, the experts fetched for the pass after them (`fetched`, undefined
// tensors: none), whose arrival is waited for after the pairs' dispatch (Note [Overlapped expert
// fetch]): expert e's matrix is the bank_index[e]-th of held then fetched (empty: the e-th).
// `after_dispatch` (may be empty) runs once the first chunk's pairs are on their way, before
// any expert compute: the next layer's prefetch. Returns [tokens, hidden] = sum over a token's
// pairs of gate * expert(x). Without a pipeline every pair keeps its exact backward.
torch::Tensor routed_experts(const torch::Tensor& x, const torch::Tensor& gates,
                             const torch::Tensor& tokens, const torch::Tensor& w_gate_up,
                             const torch::Tensor& w_down, std::shared_ptr<ExpertPipeline> pipeline,
                             std::shared_ptr<const ForwardPass> forward,
                             std::vector<int64_t> bank_index = {}, FetchedExperts fetched = {},
                             std::function<void()> after_dispatch = {});

}  // namespace lrmoe
