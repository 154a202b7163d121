#pragma once
// What one forward-backward pass of one MoE layer holds, moves and costs, from its plan alone:
// the per-rank holdings of the memory model, the bytes of every exchange, and the modeled time
// (Note [Cost model] in docs/notes.md).

#include <cstdint>
#include <vector>

#include "core/cost/cost_model.hpp"
#include "core/pipeline/expert_pipeline.hpp"
#include "core/pipeline/plan_collectives.hpp"

namespace lrmoe {

struct PassAccount {
  std::vector<LayerHolding> holdings;   // [ranks]: what each rank holds for this layer
  LayerTraffic traffic;                 // bytes over all ranks, at the run's element size
  std::vector<int64_t> bytes_sent;      // [ranks]: pair-row bytes to other ranks
  std::vector<int64_t> bytes_received;  // [ranks]
  ModeledTime modeled;
  double modeled_return = 0;  // of modeled.replicas, the gradients' return
  // The backward expert compute that its own chunks' all-to-all does not already hide behind:
  // what the return of the layer above can hide behind (core/pipeline/deferred_returns.hpp).
  double backward_cover = 0;
  PlanCollectives plan;  // what agreeing on the plan cost each rank
};

PassAccount account_pass(const PipelineSettings& settings, const ForwardPass& forward,
                         const BackwardPass& backward);

// With the optimizer state in host memory (Note [Optimizer state in host memory]), the modeled
// seconds of one optimizer step's host transfers for this layer on the busiest rank: its share
// of every expert (ceil(E/R) experts' worth, SYMI's static partition over all ranks), the
// gradients down to the host, then the updated weights back up, at the profile's host link and
// element size. 0 when the state is on the device.
double modeled_host_optimizer_seconds(const PipelineSettings& settings);

// What the next MoE layer's replica fetch travels behind when that layer is placed ahead: the
// forward's modeled expert compute (ModeledTime::forward_compute of its pass) when unchunked;
// chunked, none, as that compute hides the pass's own chunks already (the model does not share
// one compute between two transfers).
double modeled_fetch_cover(const PipelineSettings& settings, const ForwardPass& forward);

}  // namespace lrmoe
