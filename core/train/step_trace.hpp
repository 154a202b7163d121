#pragma once
// A training step's timeline (Note [Step trace] in docs/notes.md): every process's spans of the
// step, its MoE layers, their plans, each logical rank's expert work, the all-to-all-v calls and
// the expert transfers, each placed from the process's own start of the step. The trainer
// gathers them on the steps train.trace_every names; the runner records them (trace_spans) and
// `lrmoe trace` writes them as a Chrome trace.

#include <cstdint>
#include <vector>

#include "core/device/span_timer.hpp"
#include "core/distributed/collectives.hpp"
#include "core/pipeline/layer_statistics.hpp"
#include "core/train/trace_span.hpp"

namespace lrmoe {

// This process's spans of one step, `step` its one span (forward, backward and optimizer), from
// its MoE layers' statistics; times count from the step's start. An exchange is in the phase
// whose layer span it starts in.
std::vector<TraceSpan> process_trace(const std::vector<LayerStepStatistics>& layers,
                                     const TimedSpans& step, int64_t process);

// Every process's spans, in process order, on every process. Collective.
std::vector<TraceSpan> gather_trace(Collectives& collectives, const std::vector<TraceSpan>& local);

}  // namespace lrmoe
