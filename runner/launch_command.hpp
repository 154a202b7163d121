#pragma once
// `lrmoe launch -n P [EXP.toml] [--set k=v]... [--db PATH]`: one run of the experiment on P
// local processes over loopback, each hosting cluster.ranks / P logical ranks (what
// `torchrun --no-python --nproc-per-node P lrmoe run EXP.toml` does, with a free port picked and
// every rank's output prefixed).

#include <cstdint>

#include "run_command.hpp"

namespace lrmoe {

// Checks the experiment and that it splits over `processes` before starting anything, then
// returns the worst exit status of the processes.
int launch_command(const ExperimentSource& source, int64_t processes);

}  // namespace lrmoe
