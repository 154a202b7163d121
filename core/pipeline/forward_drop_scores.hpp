#pragma once
// The scores by which the forward capacity keeps each expert's highest pairs and drops the rest
// (PlacementPlan::forward_drop).

#include <torch/torch.h>

#include <cstdint>

#include "lrmoe/placement.hpp"

namespace lrmoe {

// [n] float32 on the gates' device, for n pairs: the gates themselves (LowestGate), or a
// uniform [0, 1) draw per pair that is a function of `seed` and the pair's id alone (Random), so
// that every plan and process that sees a pair draws the same. gates: [n] float32; pair_ids: [n]
// int64 (PairBatch::pair_ids), on any device.
torch::Tensor forward_drop_scores(ForwardDrop rule, const torch::Tensor& gates,
                                  const torch::Tensor& pair_ids, uint64_t seed);

}  // namespace lrmoe
