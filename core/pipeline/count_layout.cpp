#include "core/pipeline/count_layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "core/pipeline/stable_order.hpp"

namespace lrmoe {
namespace {

torch::Tensor on_device(const std::vector<int64_t>& values, const torch::Device& device) {
  return torch::tensor(values, torch::kInt64).to(device);
}

// `values` [runs] repeated `lengths` [runs] times each, in order: `total` rows, filled on the
// host (the counts are there) and copied to the device once.
torch::Tensor runs(const std::vector<int64_t>& values, const std::vector<int64_t>& lengths,
                   int64_t total, const torch::Device& device) {
  torch::Tensor filled = torch::empty({total}, torch::kInt64);
  int64_t* row = filled.data_ptr<int64_t>();
  for (std::size_t r = 0; r < values.size(); ++r) {
    TORCH_CHECK(lengths[r] >= 0 && row + lengths[r] <= filled.data_ptr<int64_t>() + total,
                "runs: the lengths pass ", total, " rows");
    row = std::fill_n(row, lengths[r], values[r]);
  }
  return filled.to(device);
}

}  // namespace

PairLayout count_pair_layout(const std::vector<int64_t>& routed, const torch::Tensor& experts,
                             const InstanceTable& table, int64_t ranks,
                             const ProcessView& process) {
  const int64_t I = table.size();
  const torch::Device device = experts.device();
  const int64_t m = experts.numel();
  auto count = [&](int64_t h, int64_t i) { return routed[static_cast<std::size_t>(h * I + i)]; };
  PairLayout layout;
  layout.ranks = ranks;

  // This process's pairs run by expert, then home rank, so their instances are the runs of the
  // groups in that order, each group's in the order of its expert's instances.
  std::vector<int64_t> run_instance, run_length;
  for (const std::vector<int64_t>& instances : table.expert_instances) {
    for (int64_t h = process.first_rank(); h < process.first_rank() + process.ranks_per_process;
         ++h) {
      for (const int64_t i : instances) {
        if (count(h, i) == 0) continue;
        run_instance.push_back(i);
        run_length.push_back(count(h, i));
      }
    }
  }
  const int64_t assigned = std::accumulate(run_length.begin(), run_length.end(), int64_t{0});
  if (assigned != m)
    throw PlanError(fmt::format(
        "the scalable plan routed {} pairs homed on process {}'s ranks, which has {}: the "
        "routing's counts do not cover the pass's pairs",
        assigned, process.index, m));
  layout.instance = runs(run_instance, run_length, m, device);
  // Stable: each instance's pairs in pair order (Note [Pair order]).
  layout.order = stable_order(layout.instance, I);

  set_layout_counts(layout, routed, table, ranks);

  ProcessSlice& slice = layout.local;
  slice = slice_counts(layout.instance_offsets, layout.matrix, table, process);
  // Every pair here is homed here: home rows are the pairs, sent in destination order.
  slice.home_pairs = identity_order(m, torch::dtype(torch::kInt64).device(device));
  slice.send_rows = layout.order;
  if (process.processes == 1) return layout;

  // The receive buffer holds each source process's rows in destination order, sources in
  // order; destination order has, per instance, the sources in order (pair order is process
  // order within an expert). Blocks of (instance, source) in destination order, each a run of
  // consecutive buffer rows from where that source's rows have got to.
  const auto P = static_cast<std::size_t>(process.processes);
  std::vector<int64_t> buffer_start(P, 0);  // where each source's rows begin in the buffer
  std::partial_sum(slice.recv_counts.begin(), slice.recv_counts.end() - 1,
                   buffer_start.begin() + 1);
  const int64_t received =
      std::accumulate(slice.recv_counts.begin(), slice.recv_counts.end(), int64_t{0});
  torch::Tensor arrival = torch::empty({received}, torch::kInt64);
  int64_t* buffer_row = arrival.data_ptr<int64_t>();
  int64_t destination = 0;
  auto mismatch = [&] {
    return PlanError(fmt::format(
        "the scalable plan's layout: process {} receives {} rows, its instances do not take as "
        "many",
        process.index, received));
  };
  for (int64_t i = 0; i < I; ++i) {
    if (process.process_of(table.instance_rank[i]) != process.index) continue;
    for (std::size_t q = 0; q < P; ++q) {
      int64_t rows = 0;
      const auto source = static_cast<int64_t>(q);
      for (int64_t h = source * process.ranks_per_process;
           h < (source + 1) * process.ranks_per_process; ++h)
        rows += count(h, i);
      if (destination + rows > received) throw mismatch();
      std::iota(buffer_row + destination, buffer_row + destination + rows, buffer_start[q]);
      buffer_start[q] += rows;
      destination += rows;
    }
  }
  if (destination != received) throw mismatch();
  slice.arrival = arrival.to(device);
  return layout;
}

torch::Tensor destination_rows(const std::vector<int64_t>& routed, const PairLayout& layout,
                               const InstanceTable& table, const ProcessView& process) {
  const int64_t I = table.size();
  const int64_t first = process.first_rank(), last = first + process.ranks_per_process;
  // Per instance: where this process's rows of it begin globally (after those of the processes
  // before it) less where they begin among this process's own rows in destination order.
  std::vector<int64_t> shift(static_cast<std::size_t>(I));
  int64_t mine_before = 0;
  for (int64_t i = 0; i < I; ++i) {
    int64_t before = 0, mine = 0;
    for (int64_t h = 0; h < last; ++h)
      (h < first ? before : mine) += routed[static_cast<std::size_t>(h * I + i)];
    shift[static_cast<std::size_t>(i)] =
        layout.instance_offsets[static_cast<std::size_t>(i)] + before - mine_before;
    mine_before += mine;
  }
  const torch::Tensor& order = layout.order;
  if (!order.device().is_cpu())
    return inverse_permutation(order) +
           take_rows(on_device(shift, order.device()), layout.instance);
  // On the host, one visit per pair: pair order[k] is destination row k here.
  const torch::Tensor at = order.contiguous(), instance = layout.instance.contiguous();
  const int64_t n = at.numel();
  TORCH_CHECK(instance.numel() == n, "destination_rows: ", instance.numel(), " instances for ", n,
              " pairs");
  const int64_t* pair = at.data_ptr<int64_t>();
  const int64_t* pair_instance = instance.data_ptr<int64_t>();
  torch::Tensor rows = torch::empty({n}, at.options());
  int64_t* row = rows.data_ptr<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    TORCH_CHECK(
        pair[k] >= 0 && pair[k] < n && pair_instance[pair[k]] >= 0 && pair_instance[pair[k]] < I,
        "destination_rows: pair ", pair[k], " of ", n, " or its instance out of range");
    row[pair[k]] = k + shift[static_cast<std::size_t>(pair_instance[pair[k]])];
  }
  return rows;
}

}  // namespace lrmoe
