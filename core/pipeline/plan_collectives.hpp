#pragma once
// What agreeing on one pass's plan costs each rank, in either plan (Note [Exact multi-process
// plan], Note [Scalable planning] in docs/notes.md), from the plan's sizes alone: the plan's own
// collectives, listed once, from which follow their modeled time under the run's hardware
// profile and the bytes the busiest rank receives, and the arrays the plan holds beyond a rank's
// own pairs (PlanCollectives, core/pipeline/layer_statistics.hpp). One rank per process, as the
// cost model assumes.

#include "core/pipeline/expert_pipeline.hpp"

namespace lrmoe {

PlanCollectives plan_collectives(const PipelineSettings& settings, const ForwardPass& forward,
                                 const BackwardPass& backward);

}  // namespace lrmoe
