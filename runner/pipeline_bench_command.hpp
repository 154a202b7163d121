#pragma once
// `lrmoe bench-pipeline`: one MoE layer whose expert GEMMs dominate, on R logical ranks, timed
// forward plus backward under a few variants of its policies, interleaved in one run so that
// machine noise hits them alike; and the share of the layer's time spent planning, scoring,
// selecting, routing and compacting. The variants are the values of one experiment key
// (`--vary`); by default the lrmoe placement's backward quota, keep_fraction = 1, 0.5, 0.25.

#include <cstdint>
#include <string>
#include <vector>

namespace lrmoe {

struct PipelineBenchOptions {
  int64_t tokens = 2048;
  int64_t hidden = 256;
  int64_t expert_ffn = 512;
  int64_t experts = 32;
  int64_t top_k = 4;
  int64_t ranks = 4;
  int64_t rounds = 5;
  // Experiment overrides for every variant ("section.key=value"); the layer's dimensions above
  // and the lrmoe bundle come first, so these can change the policies and their parameters.
  std::vector<std::string> overrides;
  // "section.key=v1,v2,...": one variant per value, the first the baseline of the ratios.
  std::string vary = "policies.placement.lrmoe.keep_fraction=1,0.5,0.25";
};

int pipeline_bench_command(const PipelineBenchOptions& options);

}  // namespace lrmoe
