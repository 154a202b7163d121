#pragma once
// The routed pairs of one replayed pass of one MoE layer (Note [Replay] in docs/notes.md): what
// the router would have given the pipeline, made from per-expert counts, with synthetic gates
// and backward signals. Nothing here is a model: the pairs have no rows.
//
// Tokens are numbered 0..tokens-1 and homed as the MoE layer homes them (token t on rank
// t * ranks / tokens). The counts' expert choices are dealt to the tokens' top_k slots in a
// seeded random order, so every rank homes the same number of pairs and each expert's pairs come
// from tokens spread over all ranks. A token may draw one expert twice; the plan does not look
// at which token a pair belongs to beyond its home rank, so this changes nothing it decides.

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "lrmoe/policy.hpp"

namespace lrmoe {

struct ReplayPairs {
  torch::Tensor experts;  // [pairs] int64, sorted by expert then token (Note [Pair order])
  // [pairs] float32: uniform in [0.5, 1.5) / top_k, about the size of a top-k softmax gate
  torch::Tensor gates;
  torch::Tensor home;  // [pairs] int64 home rank
};

// `counts`: [experts] pairs per expert, summing to tokens * top_k. CPU tensors.
ReplayPairs replay_pairs(const std::vector<int64_t>& counts, int64_t tokens, int64_t top_k,
                         int64_t ranks, uint64_t seed);

// The backward signals of `gates.numel()` computed pairs (the rest of the PairBatch is the
// pipeline's to fill): gates as given, and |d|, |x|, |h| each drawn log-normal (median 1, log
// standard deviation 0.5), independently per pair. A metric that ranks pairs by them ranks at
// random; how many pairs are kept is the plan's, not the signals'.
PairBatch replay_signals(const torch::Tensor& gates, uint64_t seed);

}  // namespace lrmoe
