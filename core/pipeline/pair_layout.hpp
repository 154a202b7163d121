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

#include "core/pipeline/expert_counts.hpp"
#include "core/pipeline/instance_table.hpp"
#include "core/pipeline/process_view.hpp"

namespace lrmoe {

// This process's part of a layout. "Home rows" are the rows of the pairs whose home rank is
// here, in pair order; "destination rows" are the rows of the pairs whose instance is here, in
// destination order.
struct ProcessSlice {
  torch::Tensor home_pairs;  // [home rows] int64: their pair indices, increasing
  // [home rows] int64: home row of each row sent, by destination order
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

// Consecutive pairs of this process, in pair order, with one home rank and one instance: their
// destination rows are consecutive too. What a scalable plan's layout is made of (Note [Layout
// runs] in docs/notes.md).
struct PairRun {
  int64_t first_pair = 0;  // among this process's pairs of the pass
  int64_t pairs = 0;
  int64_t instance = 0;
  int64_t home_rank = 0;
  int64_t first_row = 0;  // its first pair's row in the pass's global destination order
};

// Tensors are on the training device; the counts are on the host, brought over in one copy per
// layout (Note [Host synchronisation] in docs/notes.md).
struct PairLayout {
  int64_t ranks = 0;
  torch::Tensor order;  // [pairs] int64: pair index of each destination row
  // [pairs] int64: instance of each pair (pair order); a layout counted from routed counts has
  // it only when its pass is split in chunks (count_pair_layout)
  torch::Tensor instance;
  std::vector<int64_t> instance_offsets;  // [instances + 1]: rows of instance i
  std::vector<int64_t> load;              // [ranks]: pairs each rank receives (its own included)
  // [ranks * ranks]: pairs from home rank s to rank d at [s * ranks + d]
  std::vector<int64_t> matrix;
  // [ranks * instances]: pairs from home rank s to instance i at [s * instances + i], over every
  // process; `matrix` summed by the instances' ranks. What a chunk of instances moves (Note
  // [Chunked exchange]).
  std::vector<int64_t> home_instance;
  ProcessSlice local;
  // The scalable plan's layouts (count_pair_layout) only: this process's pairs as runs, in pair
  // order. Empty in the exact plan's.
  std::vector<PairRun> runs;

  // [ranks]: pairs each home rank sends (to itself included): the matrix's row sums.
  std::vector<int64_t> sent_by_rank() const;
};

// This process's part of moving pairs from `home` to `instance`. `order`: the pairs in
// destination order; `instance`, `home`: [pairs] int64 (pair order), on the device;
// `instance_offsets`: rows per instance; `matrix`: [ranks * ranks] pairs from home rank s to
// instance rank d, on the host. Waits for nothing on the device.
ProcessSlice process_slice(const torch::Tensor& order, const torch::Tensor& instance,
                           const torch::Tensor& home, const std::vector<int64_t>& instance_offsets,
                           const std::vector<int64_t>& matrix, const InstanceTable& table,
                           const ProcessView& process);

// Pairs from the ranks of process `from` to the ranks of process `to`, summed from a rank matrix
// [ranks * ranks].
int64_t process_pairs(const std::vector<int64_t>& matrix, int64_t ranks, const ProcessView& process,
                      int64_t from, int64_t to);

// The counts of this process's part of a layout, from its rows per instance (`instance_offsets`
// [instances + 1]) and rank matrix: send_counts, recv_counts, first_row and instance_offsets.
ProcessSlice slice_counts(const std::vector<int64_t>& instance_offsets,
                          const std::vector<int64_t>& matrix, const InstanceTable& table,
                          const ProcessView& process);

// [ranks]: the pairs each rank receives, from a rank matrix [ranks * ranks].
std::vector<int64_t> load_of(const std::vector<int64_t>& matrix, int64_t ranks);

// [ranks * ranks]: pairs from home rank s to rank d at [s * ranks + d], from pairs per (home
// rank, instance) [ranks * instances] summed by the instances' ranks.
std::vector<int64_t> rank_matrix(const std::vector<int64_t>& home_instance,
                                 const InstanceTable& table, int64_t ranks);

// Sets `layout`'s counts from its pairs per (home rank, instance) `home_instance`: it, the rows
// per instance, the rank matrix and the loads.
void set_layout_counts(PairLayout& layout, std::vector<int64_t> home_instance,
                       const InstanceTable& table, int64_t ranks);

// `instance`: [pairs] int64 index into table.instances; `home`: [pairs] int64 home ranks; both on
// the device of table's tensors. `extra`: bincounts the caller wants brought to the host in the
// layout's one copy; their counts are returned in `extra_counts`.
PairLayout build_pair_layout(const torch::Tensor& instance, const torch::Tensor& home,
                             const InstanceTable& table, int64_t ranks, const ProcessView& process,
                             const std::vector<CountRequest>& extra = {},
                             std::vector<std::vector<int64_t>>* extra_counts = nullptr);

}  // namespace lrmoe
