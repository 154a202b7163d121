#pragma once
// `lrmoe bench-parallel [EXP.toml] [--set k=v]... [--steps N] [-n P] [--rounds K]`: the cost of
// running the pipeline over processes, measured side by side in one run on this machine (loopback):
//  - the bus bandwidth of the pipeline's all-to-all-v calls while training on P processes,
//    against a bare c10d all-to-all-v moving the same bytes in as many calls between the same
//    processes right after (ratio pipeline / bare);
//  - the training step time on P processes against one process (ratio P / 1).
// Each measurement runs in fresh processes started like `lrmoe launch`; nothing is recorded.

#include <cstdint>
#include <string>

#include "run_command.hpp"

namespace lrmoe {

int parallel_bench_command(const ExperimentSource& source, int64_t steps, int64_t processes,
                           int64_t rounds);

// The hidden worker each of those processes runs: trains `steps` timed steps, then (with more
// than one process) times the bare all-to-all-v; process 0 writes its figures to `result_path`.
int parallel_bench_worker(const ExperimentSource& source, int64_t steps,
                          const std::string& result_path);

}  // namespace lrmoe
