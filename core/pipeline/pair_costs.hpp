#pragma once
// The unit costs of one MoE layer, from the model's dimensions: bytes for the memory model
// (lrmoe/memory_model.hpp, Note [Memory model] in docs/notes.md), rows and expert shapes for the
// exchanges and the cost model (Note [Cost model]). One place, so that the placement policies,
// the plan check, the accounting and the cost model use the same numbers.

#include <cstdint>

#include "core/config/experiment.hpp"
#include "core/config/model_config.hpp"
#include "core/config/train_config.hpp"
#include "lrmoe/memory_model.hpp"

namespace lrmoe {

// Bytes per element of what a run holds and moves. Parameters, their gradients and the optimizer
// state stay fp32 whatever the precision; the token rows, activations and everything exchanged
// are in the compute dtype (Note [Mixed precision] in docs/notes.md).
struct ElementSizes {
  int64_t parameter = 4;
  int64_t activation = 4;
};

// A run's element sizes at `precision`: fp32 parameters, activations of 4 bytes (fp32) or 2
// (bf16).
ElementSizes element_sizes(Precision precision);

struct PairCosts {
  ElementSizes element_bytes;
  int64_t hidden = 0;                // model.hidden_size
  int64_t ffn = 0;                   // model.expert_ffn_size
  int64_t row_bytes = 0;             // one token row (hidden) in an all-to-all
  int64_t pre_activation_bytes = 0;  // one pair's SwiGLU pre-activations (2 * ffn)
  int64_t expert_bytes = 0;          // parameters of one expert (fp32 master weights)
  // Per pair computed in forward: the received input row, the hidden activation and the output
  // row, and the pre-activations (transient when recomputed, else saved until backward). Per
  // kept pair in backward: the incoming gradient row and input row, the pre-activations
  // (recomputed or saved) and their gradients, and the input-gradient row.
  MemoryCosts memory;
};

PairCosts pair_costs(const ModelConfig& model, bool recompute, ElementSizes element_bytes);
// A run's: `model`'s sizes (the experiment's, or the trainer's with its vocabulary resolved) at
// the experiment's recompute setting and precision.
PairCosts pair_costs(const ModelConfig& model, const Experiment& experiment);

}  // namespace lrmoe
