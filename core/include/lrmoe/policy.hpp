#pragma once
// What every policy object has in common, and the pair data the backward-phase policies see.

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace lrmoe {

class Policy {
 public:
  virtual ~Policy() = default;

  // A policy whose answers depend on state it keeps between calls (beyond its parameters) saves
  // that state here, as bytes of its own format, and takes it back in restore_state when a run
  // resumes from a checkpoint, so that the resumed run answers as the uninterrupted one would
  // (Note [Checkpoints] in docs/notes.md). One object serves every MoE layer: the bytes are all
  // its state. Stateless policies keep these defaults.
  virtual std::vector<uint8_t> save_state() const { return {}; }
  // `state`: what save_state returned; empty for a checkpoint written without state.
  virtual void restore_state(const std::vector<uint8_t>& state) { (void)state; }
};

// The routed token-expert pairs of one MoE layer in one pass, over all ranks, sorted by expert:
// the pairs of expert e are [expert_offsets[e], expert_offsets[e+1]). Tensors live on the
// layer's device (on the CPU for a policy whose descriptor says TensorPlace::Host); experts and
// pair_ids are int64, the others float32. Note [Pair order] in docs/notes.md. In the exact plan
// every process sees the same batch and must answer alike (Note [Exact multi-process plan]); in
// the scalable one a metric scores this process's computed pairs (Note [Scalable planning]).
struct PairBatch {
  int64_t step = 0;
  int64_t layer = 0;
  // Differs per (experiment seed, step, layer, micro-batch). Seed any randomness with it, mixed
  // with a constant of the plugin's own: the metric and the selection both see this value, and a
  // selection that drew from the same stream as a random metric would correlate with its scores.
  uint64_t seed = 0;
  at::Tensor experts;  // [pairs]
  // [pairs] int64: names the pair within the pass, the same whichever process scores it, in
  // either plan and on any number of processes: its place in pair order over every process (the
  // order one process holding every token would have). Key per-pair draws by it
  // (lrmoe/counter_random.hpp).
  at::Tensor pair_ids;
  at::Tensor gates;          // [pairs] router gate g of the pair
  at::Tensor upstream_norm;  // [pairs] |d|, the loss gradient at the pair's token output
  at::Tensor input_norm;     // [pairs] |x|, the token's input to the expert
  at::Tensor hidden_norm;    // [pairs] |h|, the expert's hidden activation; may be undefined
  std::vector<int64_t> expert_offsets;  // [experts + 1]
  std::vector<int64_t> quota;           // [experts] from the placement plan
};

}  // namespace lrmoe
