#pragma once
// The memory model's unit costs for one MoE layer (see lrmoe/placement.hpp), from the model's
// dimensions. One place, so that the placement policies, the plan check and the accounting use
// the same numbers.

#include <cstdint>

#include "core/config/experiment.hpp"

namespace lrmoe {

struct PairCosts {
  int64_t element_bytes = 4;
  int64_t row_bytes = 0;            // one token row (hidden) in an all-to-all
  int64_t pre_activation_bytes = 0; // one pair's SwiGLU pre-activations (2 * ffn)
  int64_t expert_bytes = 0;         // parameters of one expert
  int64_t slot_bytes = 0;           // one instance: parameters and gradient buffer
  // Per pair computed in forward on a rank: the received input row, the hidden activation and
  // the output row, plus the pre-activations saved for backward unless they are recomputed.
  int64_t forward_pair_bytes = 0;
  // Per kept pair in backward on a rank: the incoming gradient row and input row, the
  // pre-activations (recomputed or saved) and their gradients, and the input-gradient row.
  int64_t backward_pair_bytes = 0;
  // FLOPs of one pair through one expert: forward, and backward (weight plus input gradients).
  double forward_flops = 0;
  double backward_flops = 0;
};

PairCosts pair_costs(const ModelConfig& model, bool recompute, int64_t element_bytes = 4);

}  // namespace lrmoe
