#include "core/pipeline/pair_layout.hpp"

#include <algorithm>
#include <numeric>

#include "core/pipeline/stable_order.hpp"
#include "lrmoe/expert_segments.hpp"

namespace lrmoe {
int64_t process_pairs(const std::vector<int64_t>& matrix, int64_t ranks, const ProcessView& process,
                      int64_t from, int64_t to) {
  int64_t pairs = 0;
  for (int64_t s = from * process.ranks_per_process; s < (from + 1) * process.ranks_per_process;
       ++s) {
    for (int64_t d = to * process.ranks_per_process; d < (to + 1) * process.ranks_per_process; ++d)
      pairs += matrix[static_cast<std::size_t>(s * ranks + d)];
  }
  return pairs;
}

std::vector<int64_t> PairLayout::sent_by_rank() const {
  std::vector<int64_t> sent(static_cast<std::size_t>(ranks), 0);
  for (int64_t s = 0; s < ranks; ++s) {
    for (int64_t d = 0; d < ranks; ++d)
      sent[static_cast<std::size_t>(s)] += matrix[static_cast<std::size_t>(s * ranks + d)];
  }
  return sent;
}

ProcessSlice slice_counts(const std::vector<int64_t>& instance_offsets,
                          const std::vector<int64_t>& matrix, const InstanceTable& table,
                          const ProcessView& process) {
  ProcessSlice slice;
  const int64_t ranks = process.processes * process.ranks_per_process;
  for (int64_t q = 0; q < process.processes; ++q) {
    slice.send_counts.push_back(process_pairs(matrix, ranks, process, process.index, q));
    slice.recv_counts.push_back(process_pairs(matrix, ranks, process, q, process.index));
  }
  // The destination rows here are one contiguous run, as instances go by rank and a process
  // hosts consecutive ranks (Note [Pair order]).
  const std::vector<int64_t>& instance_rank = table.instance_rank;  // non-decreasing
  const auto first_instance = static_cast<std::size_t>(
      std::lower_bound(instance_rank.begin(), instance_rank.end(), process.first_rank()) -
      instance_rank.begin());
  slice.first_row = instance_offsets[first_instance];
  slice.instance_offsets.assign(instance_offsets.size(), 0);
  for (std::size_t i = 0; i + 1 < instance_offsets.size(); ++i) {
    const bool local = process.process_of(table.instance_rank[i]) == process.index;
    const int64_t count = local ? instance_offsets[i + 1] - instance_offsets[i] : 0;
    slice.instance_offsets[i + 1] = slice.instance_offsets[i] + count;
  }
  return slice;
}

std::vector<int64_t> load_of(const std::vector<int64_t>& matrix, int64_t ranks) {
  std::vector<int64_t> load(static_cast<std::size_t>(ranks), 0);
  for (int64_t s = 0; s < ranks; ++s) {
    for (int64_t d = 0; d < ranks; ++d)
      load[static_cast<std::size_t>(d)] += matrix[static_cast<std::size_t>(s * ranks + d)];
  }
  return load;
}

ProcessSlice process_slice(const torch::Tensor& order, const torch::Tensor& instance,
                           const torch::Tensor& home, const std::vector<int64_t>& instance_offsets,
                           const std::vector<int64_t>& matrix, const InstanceTable& table,
                           const ProcessView& process) {
  // The counts come from the rank matrix on the host; the device work below never waits.
  ProcessSlice slice = slice_counts(instance_offsets, matrix, table, process);
  if (process.processes == 1) {
    // Everything is here: the move is the permutation into destination order.
    slice.home_pairs = identity_order(instance.numel(), order.options());
    slice.send_rows = order;
    return slice;
  }
  const int64_t home_rows =
      std::accumulate(slice.send_counts.begin(), slice.send_counts.end(), int64_t{0});
  const int64_t rows =
      std::accumulate(slice.recv_counts.begin(), slice.recv_counts.end(), int64_t{0});
  const torch::Tensor home_process = process.process_of(home);

  // Sending: this process's home pairs in destination order (hence grouped by destination).
  const torch::Tensor is_home = home_process.eq(process.index);
  slice.home_pairs = positions_of_true(is_home, home_rows);
  const torch::Tensor home_row = is_home.to(torch::kInt64).cumsum(0) - 1;  // valid where is_home
  const torch::Tensor sent =
      order.index_select(0, positions_of_true(is_home.index_select(0, order), home_rows));
  slice.send_rows = home_row.index_select(0, sent);

  // Receiving: each source sends its rows in destination order, so the buffer is ordered by
  // (source, row).
  const torch::Tensor source = home_process.index_select(0, order.narrow(0, slice.first_row, rows));
  const torch::Tensor buffer_order = stable_order(source, process.processes);
  slice.arrival = inverse_permutation(buffer_order);
  return slice;
}

std::vector<int64_t> rank_matrix(const std::vector<int64_t>& home_instance,
                                 const InstanceTable& table, int64_t ranks) {
  const int64_t I = table.size();
  std::vector<int64_t> matrix(static_cast<std::size_t>(ranks * ranks), 0);
  for (int64_t h = 0; h < ranks; ++h) {
    for (int64_t i = 0; i < I; ++i) {
      matrix[static_cast<std::size_t>(h * ranks +
                                      table.instance_rank[static_cast<std::size_t>(i)])] +=
          home_instance[static_cast<std::size_t>(h * I + i)];
    }
  }
  return matrix;
}

void set_layout_counts(PairLayout& layout, std::vector<int64_t> home_instance,
                       const InstanceTable& table, int64_t ranks) {
  const int64_t I = table.size();
  // The rows per instance and the rank matrix in one pass over the counts.
  std::vector<int64_t> rows(static_cast<std::size_t>(I), 0);
  layout.matrix.assign(static_cast<std::size_t>(ranks * ranks), 0);
  for (int64_t h = 0; h < ranks; ++h) {
    int64_t* to_rank = layout.matrix.data() + h * ranks;
    const int64_t* pairs = home_instance.data() + h * I;
    for (int64_t i = 0; i < I; ++i) {
      rows[static_cast<std::size_t>(i)] += pairs[i];
      to_rank[table.instance_rank[static_cast<std::size_t>(i)]] += pairs[i];
    }
  }
  layout.instance_offsets.assign(1, 0);
  std::partial_sum(rows.begin(), rows.end(), std::back_inserter(layout.instance_offsets));
  layout.load = load_of(layout.matrix, ranks);
  layout.home_instance = std::move(home_instance);
}

PairLayout build_pair_layout(const torch::Tensor& instance, const torch::Tensor& home,
                             const InstanceTable& table, int64_t ranks, const ProcessView& process,
                             const std::vector<CountRequest>& extra,
                             std::vector<std::vector<int64_t>>* extra_counts) {
  PairLayout layout;
  layout.ranks = ranks;
  layout.instance = instance;
  // Stable, so a slice keeps its pairs in pair order (expert, then token): deterministic, and the
  // same on every process (Note [Pair order] in docs/notes.md).
  layout.order = stable_order(instance, table.size());

  // Pairs per (home rank, instance), with what the caller wants counted, in one copy to the
  // host; rows per instance and the rank matrix are its sums.
  const int64_t I = table.size();
  std::vector<CountRequest> requests = {{home, ranks, instance, I}};
  requests.insert(requests.end(), extra.begin(), extra.end());
  std::vector<std::vector<int64_t>> counts = host_counts(requests);
  set_layout_counts(layout, std::move(counts[0]), table, ranks);
  if (extra_counts) extra_counts->assign(counts.begin() + 1, counts.end());
  layout.local = process_slice(layout.order, instance, home, layout.instance_offsets, layout.matrix,
                               table, process);
  return layout;
}

}  // namespace lrmoe
