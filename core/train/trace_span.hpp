#pragma once
// One span of a step's timeline (Note [Step trace] in docs/notes.md), as a step report carries
// it: made by core/train/step_trace.cpp, recorded by the runner, drawn by `lrmoe trace`.

#include <cstdint>

namespace lrmoe {

enum class TraceKind { Step, Layer, Plan, Expert, AllToAll, Transfer };

// "step", "layer", "plan", "expert", "all-to-all", "transfer": the names recorded.
const char* trace_kind_name(TraceKind kind);

struct TraceSpan {
  int64_t process = 0;
  int64_t rank = -1;   // the logical rank of an expert span; -1: the process's own work
  int64_t layer = -1;  // index among the MoE layers; -1: the whole step
  int phase = -1;      // kForwardPhase or kBackwardPhase; -1: the whole step
  TraceKind kind = TraceKind::Step;
  double start = 0;    // seconds from the process's start of the step
  double seconds = 0;  // how long it took (exchanges: from issue to arrival)
};

}  // namespace lrmoe
