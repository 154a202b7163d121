#pragma once
// A rank's memory over one training step, as a timeline of the moments where buffers are
// allocated and freed (Note [Memory model] in docs/notes.md): the forward of each MoE layer in
// order, then the backward of each in reverse, once per micro-batch. The recorded memory of a
// rank is the peak of that timeline, with the moment it occurs, for the total and, separately,
// for the paper's subtotal (owned experts + replicas + token buffers); never a sum of buffers
// that are not live together.

#include <cstdint>
#include <string>
#include <vector>

#include "core/pipeline/layer_statistics.hpp"
#include "lrmoe/memory_model.hpp"
#include "lrmoe/routing.hpp"

namespace lrmoe {

// Memory of one rank by the categories of the design, in bytes, at one moment.
struct RankMemory {
  int64_t owned = 0;     // parameters of the experts the rank owns
  int64_t replicas = 0;  // parameters of the replicas it hosts (live layers)
  // owned experts' gradient buffers, and the replicas' in a layer's backward
  int64_t gradients = 0;
  int64_t optimizer = 0;  // Adam state of the experts it owns
  // activations saved for the expert backward, and the forward token buffers
  int64_t forward_tokens = 0;
  int64_t backward_tokens = 0;  // the backward token buffers of the layer in backward
  // dense parameters, gradients, optimizer state, activations (estimated)
  int64_t dense = 0;

  int64_t subtotal() const { return owned + replicas + forward_tokens + backward_tokens; }
  int64_t total() const { return subtotal() + gradients + optimizer + dense; }
};

// "forward" or "backward": the text recorded for a moment.
const char* phase_name(Phase phase);

// A moment of the timeline: the forward or backward of one MoE layer (index among the MoE layers).
struct TimelineMoment {
  Phase phase = Phase::Forward;
  int64_t layer = 0;
};

struct MemoryPeak {
  RankMemory at_peak;            // every category at the moment of the largest total
  TimelineMoment peak;           // that moment
  int64_t subtotal = 0;          // the largest subtotal over the timeline
  TimelineMoment subtotal_peak;  // its moment
};

// Bytes a rank holds all step outside the MoE layers' plans.
struct StaticMemory {
  int64_t optimizer = 0;  // Adam state of the experts it owns
  int64_t dense = 0;
};

// The peak of one forward-backward pass of one rank: `layers[l]` is what it holds for MoE layer
// l; `placed_ahead[l]` (empty: none) says that layer l's replicas arrive during layer l - 1's
// forward (LayerStepStatistics::placed_ahead). Ties keep the earliest moment.
MemoryPeak pass_peak(const MemoryCosts& costs, const std::vector<LayerHolding>& layers,
                     const StaticMemory& fixed, const std::vector<bool>& placed_ahead = {});

// The larger of two peaks, each measure on its own: (the step's peak over its micro-batches).
MemoryPeak max_peak(const MemoryPeak& a, const MemoryPeak& b);

// The paper's subtotal for one MoE layer on its own: the rank's owned and replica parameters of
// that layer and its token buffers at the layer's busier phase (saved activations, plus the
// forward or the backward buffers). Unlike the timeline's subtotal it leaves out the other
// layers' parameters and saved activations, which every policy holds alike.
double layer_subtotal_bytes(const MemoryCosts& costs, const LayerHolding& holding);

// Per logical rank, the peak of one optimizer step: every pass (micro-batch) of the MoE layers
// `layers` (in layer order, LayerStepStatistics::passes filled), the largest. Empty without layers.
std::vector<MemoryPeak> step_memory_peaks(const MemoryCosts& costs,
                                          const std::vector<LayerStepStatistics>& layers,
                                          const StaticMemory& fixed);

}  // namespace lrmoe
