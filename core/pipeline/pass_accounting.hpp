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
  PlanCollectives plan;       // what agreeing on the plan cost each rank
};

PassAccount account_pass(const PipelineSettings& settings, const ForwardPass& forward,
                         const BackwardPass& backward);

// The forward's modeled expert compute (ModeledTime::forward_compute of its pass): what the next
// MoE layer's replica fetch travels behind when that layer is placed ahead.
double modeled_forward_compute(const PipelineSettings& settings, const ForwardPass& forward);

}  // namespace lrmoe
