#pragma once
// The critical path of one MoE layer in one step: the time of its slowest rank in each phase,
// summed over the phases, beside the sum of every rank's time (Note [Critical path] in
// docs/notes.md).

#include <cstdint>
#include <vector>

namespace lrmoe {

enum { kForwardPhase = 0, kBackwardPhase = 1, kPhases = 2 };

// What one process measured of one layer in one step, per phase.
struct ProcessPhaseTimes {
  double wall[kPhases] = {0, 0};      // the layer's measured time on the process
  double planning[kPhases] = {0, 0};  // of which the global plan (every rank computes all of it)
};

struct CriticalPath {
  // [phase][rank]: each rank's time: its own expert work, the plan, and its share of the
  // process's other work (router, compaction, exchanges, combine).
  std::vector<double> rank_seconds[kPhases];
  double seconds = 0;   // sum over phases of the slowest rank
  double rank_sum = 0;  // sum over phases and ranks
};

// `expert_seconds[phase][rank]`: each rank's timed expert work; `processes[p]`: the measured
// times of process p, which hosts ranks [p * ranks_per_process, (p + 1) * ranks_per_process).
CriticalPath critical_path(const std::vector<double> (&expert_seconds)[kPhases],
                           const std::vector<ProcessPhaseTimes>& processes,
                           int64_t ranks_per_process);

}  // namespace lrmoe
