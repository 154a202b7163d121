#pragma once
// The memory model of one rank and one MoE layer: what the layer holds, and when it is live.
// One model for the runner's plan check, the placement plugins and the recorded memory
// (see Note [Memory model] in docs/notes.md).
//
// Over one training step a rank runs the forward of the MoE layers in order, then their
// backward in reverse. One layer's buffers are live:
//   - all step:  the parameters and gradient buffers of the experts it owns;
//   - from its forward to the end of its backward: replica parameters (broadcast at its
//     forward, needed again by its backward) and the activations saved for the expert backward
//     (`saved_pair_bytes` per pair computed in forward);
//   - during its forward only: the forward token buffers (`forward_pair_bytes` per pair computed);
//   - during its backward only: the backward token buffers (`backward_pair_bytes` per kept pair)
//     and the replicas' gradient buffers, reduced into the owners before the next layer's backward.
// The runner records the peak of the whole timeline (core/pipeline/memory_timeline.hpp). A plan
// is checked layer by layer: layer_peak_bytes() of every rank must fit the layer's share of the
// budget. That check is sound (the timeline's peak never exceeds cluster.memory_per_rank) and
// conservative (each layer reserves room for its own transient buffers).

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace lrmoe {

// Bytes per unit, from the model's dimensions and element size.
struct MemoryCosts {
  int64_t expert_bytes = 0;        // parameters of one expert; its gradient buffer is as large
  int64_t forward_pair_bytes = 0;  // per pair computed in forward, during the layer's forward
  // per pair computed in forward, from its forward to its backward
  int64_t saved_pair_bytes = 0;
  int64_t backward_pair_bytes = 0;  // per kept pair, during the layer's backward
};

// What one rank holds for one MoE layer in one forward-backward pass. Before routing, a plan's
// pairs count as split evenly over an expert's instances, so they may be fractional.
struct LayerHolding {
  int64_t owned = 0;     // expert instances the rank owns
  int64_t replicas = 0;  // replica instances it hosts
  double forward_pairs = 0;
  double backward_pairs = 0;
};

// Owned parameters and gradient buffers: live all step.
inline double resident_bytes(const MemoryCosts& c, const LayerHolding& h) {
  return 2.0 * static_cast<double>(h.owned) * static_cast<double>(c.expert_bytes);
}
// Replica parameters and saved activations: live from the layer's forward to its backward.
inline double carried_bytes(const MemoryCosts& c, const LayerHolding& h) {
  return static_cast<double>(h.replicas) * static_cast<double>(c.expert_bytes) +
         h.forward_pairs * static_cast<double>(c.saved_pair_bytes);
}
// Forward token buffers: live during the layer's forward.
inline double forward_transient_bytes(const MemoryCosts& c, const LayerHolding& h) {
  return h.forward_pairs * static_cast<double>(c.forward_pair_bytes);
}
// Backward token buffers and replica gradient buffers: live during the layer's backward.
inline double backward_transient_bytes(const MemoryCosts& c, const LayerHolding& h) {
  return h.backward_pairs * static_cast<double>(c.backward_pair_bytes) +
         static_cast<double>(h.replicas) * static_cast<double>(c.expert_bytes);
}
// The most the layer holds at any moment of the step, on its own.
inline double layer_peak_bytes(const MemoryCosts& c, const LayerHolding& h) {
  return resident_bytes(c, h) + carried_bytes(c, h) +
         std::max(forward_transient_bytes(c, h), backward_transient_bytes(c, h));
}
inline bool layer_fits(const MemoryCosts& c, const LayerHolding& h, int64_t budget_bytes) {
  return layer_peak_bytes(c, h) <= static_cast<double>(budget_bytes);
}

// How many more forward pairs `h` can take within `budget_bytes` (its backward pairs fixed):
// each one adds saved bytes for the whole pass and forward bytes during the forward.
inline int64_t forward_pairs_that_fit(const MemoryCosts& c, LayerHolding h, int64_t budget_bytes) {
  const double budget = static_cast<double>(budget_bytes);
  const double fixed = resident_bytes(c, h) + carried_bytes(c, h);
  const double saved = static_cast<double>(c.saved_pair_bytes);
  const double forward = static_cast<double>(c.forward_pair_bytes);
  // Both moments must fit: the forward (saved + forward per pair) and the backward (saved only).
  double room = (budget - fixed - forward_transient_bytes(c, h)) / std::max(1.0, saved + forward);
  if (saved > 0) room = std::min(room, (budget - fixed - backward_transient_bytes(c, h)) / saved);
  return room <= 0 ? 0 : static_cast<int64_t>(std::floor(room));
}

// How many more kept pairs `h` can take in its backward within `budget_bytes`.
inline int64_t backward_pairs_that_fit(const MemoryCosts& c, LayerHolding h, int64_t budget_bytes) {
  const double room = (static_cast<double>(budget_bytes) - resident_bytes(c, h) -
                       carried_bytes(c, h) - backward_transient_bytes(c, h)) /
                      std::max<double>(1.0, static_cast<double>(c.backward_pair_bytes));
  return room <= 0 ? 0 : static_cast<int64_t>(std::floor(room));
}

}  // namespace lrmoe
