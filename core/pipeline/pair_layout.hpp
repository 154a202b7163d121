#pragma once
// Compaction: the pairs of one pass (forward: computed pairs, backward: kept pairs) sorted by
// destination instance, so that each destination rank receives one contiguous payload and each
// instance one contiguous slice for the grouped GEMM; and who sends how many pairs to whom.
//
// Every process builds the same layout over all pairs (the plan is global and deterministic,
// Note [Exact multi-process plan] in docs/notes.md); its ProcessSlice says which part of it this
// process sends, receives and computes. Pair, home and destination order: Note [Pair order].

#include <torch/torch.h>

#include <vector>

#include "core/pipeline/instance_table.hpp"
#include "core/pipeline/process_view.hpp"

namespace lrmoe {

// This process's part of a layout. "Home rows" are the rows of the pairs whose home rank is
// here, in pair order; "destination rows" are the rows of the pairs whose instance is here, in
// destination order.
struct ProcessSlice {
  torch::Tensor home_pairs;  // [home rows] int64 CPU: their pair indices, increasing
  // [home rows]: home row of each row sent, by destination order
  torch::Tensor send_rows;
  // [processes]: rows sent to each process (this one included)
  std::vector<int64_t> send_counts;
  std::vector<int64_t> recv_counts;       // [processes]: rows received from each process
  torch::Tensor arrival;                  // [destination rows]: where each arrives in the receive
                                          // buffer (by source, then destination order); undefined
                                          // when that is the destination order itself
  std::vector<int64_t> instance_offsets;  // [instances + 1] over the destination rows; instances
                                          // elsewhere have none
  // first destination row here in the global destination order
  int64_t first_row = 0;
};

struct PairLayout {
  int64_t ranks = 0;
  torch::Tensor order;                    // [pairs] int64: pair index of each destination row
  torch::Tensor instance;                 // [pairs] int64 CPU: instance of each pair (pair order)
  std::vector<int64_t> instance_offsets;  // [instances + 1]: rows of instance i
  std::vector<int64_t> load;              // [ranks]: pairs each rank receives (its own included)
  // [ranks * ranks]: pairs from home rank s to rank d at [s * ranks + d]
  std::vector<int64_t> matrix;
  ProcessSlice local;

  int64_t pairs() const { return instance.numel(); }
};

// `instance`: [pairs] int64 CPU index into table.instances; `home`: [pairs] int64 CPU home ranks.
// `order`: the pairs in destination order (on the device); `instance_offsets`: rows per instance.
ProcessSlice process_slice(const torch::Tensor& order, const torch::Tensor& instance,
                           const torch::Tensor& home, const std::vector<int64_t>& instance_offsets,
                           const InstanceTable& table, const ProcessView& process,
                           const torch::Device& device);

// `instance`: [pairs] int64 CPU index into table.instances; `home`: [pairs] int64 CPU home ranks.
PairLayout build_pair_layout(const torch::Tensor& instance, const torch::Tensor& home,
                             const InstanceTable& table, int64_t ranks, const ProcessView& process,
                             const torch::Device& device);

}  // namespace lrmoe
