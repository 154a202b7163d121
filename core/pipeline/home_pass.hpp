#pragma once
// Evaluation of an expert-sharded model (docs/ARCHITECTURE.md, "Expert-sharded state"): every
// pair computed, and kept, at its expert's home, the static owner's rank. Exact, like the
// single-rank layer, and no process needs an expert it does not hold. Built as the scalable plan
// builds its layouts (core/pipeline/count_layout.hpp): one all-reduce of the pairs per (home
// rank, expert), no gather of pairs.

#include <torch/torch.h>

#include <memory>

#include "core/distributed/collectives.hpp"
#include "core/pipeline/expert_pipeline.hpp"

namespace lrmoe {

// `experts`: [m] int64, this process's pairs sorted by expert (Note [Pair order]); `home`: [m]
// int64, each pair's home rank, one of this process's. Every process calls it (a collective).
// The pass's computed pairs are all of them (`local_pairs` and `computed` are [0, m)), its
// table the static owners', its layout the move from home rank to the owner.
std::shared_ptr<const ForwardPass> home_pass(const torch::Tensor& experts,
                                             const torch::Tensor& home, int64_t num_experts,
                                             int64_t ranks, const ProcessView& process,
                                             Collectives& collectives);

}  // namespace lrmoe
