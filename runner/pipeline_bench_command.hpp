#pragma once
// `lrmoe bench-pipeline`: one MoE layer whose expert GEMMs dominate, on R logical ranks, timed
// forward plus backward with every pair kept and with 50% and 25% backward quotas (the lrmoe
// placement, grad_contribution metric, quota_topk selection and capacity_aware routing), the
// variants interleaved in one run so that machine noise hits them alike; and the share of the
// layer's time spent planning, scoring, selecting, routing and compacting.

#include <cstdint>

namespace lrmoe {

struct PipelineBenchOptions {
  int64_t tokens = 2048;
  int64_t hidden = 256;
  int64_t expert_ffn = 512;
  int64_t experts = 32;
  int64_t top_k = 4;
  int64_t ranks = 4;
  int64_t rounds = 5;
};

int pipeline_bench_command(const PipelineBenchOptions& options);

}  // namespace lrmoe
