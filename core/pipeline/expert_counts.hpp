#pragma once
// Per-expert pair counts and the offsets that make each expert's pairs, once sorted by expert,
// one contiguous slice [offsets[e], offsets[e+1]) (Note [Pair order] in docs/notes.md).

#include <torch/torch.h>

#include <utility>
#include <vector>

#include "core/pipeline/process_view.hpp"

namespace lrmoe {

// The values of a 1-D integer tensor, on the host.
std::vector<int64_t> int64_values(const torch::Tensor& values);

// One bincount, on any device: of `keys` [n] int64 in [0, bins); or, with `columns` [n] int64
// in [0, column_bins), of the cells of a table [bins, column_bins], pair i counted at
// [keys[i] * column_bins + columns[i]] (on the host without forming that key tensor).
struct CountRequest {
  CountRequest(torch::Tensor keys, int64_t bins) : keys(std::move(keys)), bins(bins) {}
  CountRequest(torch::Tensor keys, int64_t bins, torch::Tensor columns, int64_t column_bins)
      : keys(std::move(keys)), bins(bins), columns(std::move(columns)), column_bins(column_bins) {}

  torch::Tensor keys;
  int64_t bins = 0;
  torch::Tensor columns;
  int64_t column_bins = 1;

  int64_t cells() const { return bins * column_bins; }
};

// The counts of several bincounts on the host, brought over in one device-to-host copy, so the
// host waits for the device once for all of them (Note [Host synchronisation]).
std::vector<std::vector<int64_t>> host_counts(const std::vector<CountRequest>& requests);

// [ranks * num_experts] pairs per (home rank, expert), on the host, of pairs in pair order
// (Note [Pair order]): `experts` [n] int64 nondecreasing and, within an expert, `home` [n] int64
// nondecreasing. On the host each group's end is found by a search out from its start, in time per
// group rather than per pair; on a device it is a bincount (host_counts).
std::vector<int64_t> pair_order_group_counts(const torch::Tensor& home, int64_t ranks,
                                             const torch::Tensor& experts, int64_t num_experts);

// The inverse: the expert and home rank of each of n pairs in pair order, grouped as
// `group_offsets` [num_experts * ranks_per_process + 1] says (group e * ranks_per_process + r:
// expert e's pairs homed on rank first_rank + r; home_group_offsets gives them). [n] int64 each,
// on `device`: what gathering them from the pairs would give, written group by group.
struct PairLabels {
  torch::Tensor experts;
  torch::Tensor home;
};
PairLabels pair_order_labels(const std::vector<int64_t>& group_offsets, int64_t ranks_per_process,
                             int64_t first_rank, const torch::Device& device);

// The pair id (PairBatch::pair_ids) of each of this process's routed pairs, in its pair order:
// the pair's place in pair order over every process, which is the one-process order, so that it
// is the same whatever the number of processes (Note [Pair order]). `groups` [ranks *
// num_experts]: routed pairs per (home rank, expert) over every process (pair_order_group_counts
// summed); this process's pairs are those homed on its ranks. [n] int64 on `device`.
torch::Tensor pair_order_ids(const std::vector<int64_t>& groups, int64_t num_experts,
                             const ProcessView& process, const torch::Device& device);

// Pairs per expert: experts [pairs] int64 -> [num_experts] on the host.
std::vector<int64_t> expert_counts(const torch::Tensor& experts, int64_t num_experts);

// [n] counts -> [n + 1] running offsets, starting at 0.
std::vector<int64_t> offsets_from_counts(const std::vector<int64_t>& counts);

}  // namespace lrmoe
