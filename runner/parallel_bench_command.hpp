#pragma once
// `lrmoe bench-parallel [EXP.toml] [--set k=v]... [--steps N] [-n P,...] [--rounds K]
// [--versus k=v]...`: the cost
// and the gain of running the pipeline over processes, measured side by side in one run on this
// machine (loopback), for one process and each P:
//  - the training step time against one process (ratio P / 1);
//  - each process's peak memory (its caching allocator's, and its resident set) and what it
//    holds of the model (sharded expert state, the default: 1/P of the experts);
//  - the bus bandwidth of the pipeline's all-to-all-v calls while training, and of its expert
//    weight transfers (sharded state), each against bare c10d calls moving the same bytes
//    between the same processes right after (ratio pipeline / bare).
// With `--versus k=v...`, a second variant (the experiment with those settings too) is measured
// in the same rounds, each of its figures beside the first's (ratio variant / as given).
// Each measurement runs in fresh processes started like `lrmoe launch`; nothing is recorded.

#include <cstdint>
#include <string>
#include <vector>

#include "run_command.hpp"

namespace lrmoe {

int parallel_bench_command(const ExperimentSource& source, int64_t steps,
                           const std::vector<int64_t>& processes, int64_t rounds,
                           const std::vector<std::string>& versus = {});

// The hidden worker each of those processes runs: trains `steps` timed steps, then (with more
// than one process) times the bare all-to-all-v; process 0 writes its figures to `result_path`.
int parallel_bench_worker(const ExperimentSource& source, int64_t steps,
                          const std::string& result_path);

}  // namespace lrmoe
