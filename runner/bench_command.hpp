#pragma once
// `lrmoe bench [EXP.toml] [--steps N]`: trains an experiment for N steps without recording it and
// prints training tokens/s, the MoE layers' share of step time, and the throughput of the MoE
// layer's grouped GEMM (on the routing of the last step) against one dense matmul of the same
// FLOPs, both measured side by side in this run.

#include <cstdint>

#include "run_command.hpp"

namespace lrmoe {

int bench_command(const ExperimentSource& source, int64_t steps);

}  // namespace lrmoe
