#pragma once
// Per-expert pair counts and the offsets that make each expert's pairs, once sorted by expert,
// one contiguous slice [offsets[e], offsets[e+1]) (Note [Pair order] in docs/notes.md).

#include <torch/torch.h>

#include <vector>

namespace lrmoe {

// The values of a 1-D integer tensor, on the host.
std::vector<int64_t> int64_values(const torch::Tensor& values);

// One bincount: `keys` [n] int64 in [0, bins), on any device.
struct CountRequest {
  torch::Tensor keys;
  int64_t bins = 0;
};

// The counts of several bincounts on the host, brought over in one device-to-host copy, so the
// host waits for the device once for all of them (Note [Host synchronisation]).
std::vector<std::vector<int64_t>> host_counts(const std::vector<CountRequest>& requests);

// Pairs per expert: experts [pairs] int64 -> [num_experts] on the host.
std::vector<int64_t> expert_counts(const torch::Tensor& experts, int64_t num_experts);

// [n] counts -> [n + 1] running offsets, starting at 0.
std::vector<int64_t> offsets_from_counts(const std::vector<int64_t>& counts);

}  // namespace lrmoe
