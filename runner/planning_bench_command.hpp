#pragma once
// `lrmoe bench-planning [EXPERIMENT] [--ranks LIST] [--tokens-per-rank LIST] [--skew zipf:S]
// [--set K=V]...`: what agreeing on a plan costs as the cluster and the batch grow, the exact
// plan against the scalable one (Note [Scalable planning] in docs/notes.md), at the experiment's
// model dimensions without training (Note [Replay]). For every ranks x tokens-per-rank cell it
// replays one pass of the first MoE layer under each plan (one sequence of tokens-per-rank
// tokens per rank; slots for the owned experts and half as many again for replicas) and prints,
// per rank (one rank per
// process): the bytes the plan's collectives bring the busiest rank, the plan's arrays held
// beyond a rank's own pairs, the pair rows the busiest rank sends, and the modeled plan and layer
// times under the experiment's hardware profile. Counted and modeled from the plans' sizes
// (core/pipeline/plan_collectives.cpp), not measured on a cluster.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "runner/run_command.hpp"

namespace lrmoe {

struct PlanningBenchOptions {
  ExperimentSource source;
  std::vector<int64_t> ranks = {8, 16, 32, 64, 128, 256, 512, 1024};
  std::vector<int64_t> tokens_per_rank = {1024, 4096};
  std::string skew = "zipf:0.5";
};

int planning_bench_command(const PlanningBenchOptions& options, std::ostream& out);

}  // namespace lrmoe
