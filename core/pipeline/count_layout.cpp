#include "core/pipeline/count_layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "core/pipeline/stable_order.hpp"

namespace lrmoe {
PairLayout count_pair_layout(std::vector<int64_t> routed, int64_t pairs,
                             const torch::Device& device, const InstanceTable& table, int64_t ranks,
                             const ProcessView& process, bool with_instances) {
  const int64_t I = table.size();
  const int64_t m = pairs;
  const int64_t first = process.first_rank(), last = first + process.ranks_per_process;
  PairLayout layout;
  layout.ranks = ranks;
  set_layout_counts(layout, std::move(routed), table, ranks);
  const std::vector<int64_t>& counts = layout.home_instance;
  auto count = [&](int64_t h, int64_t i) { return counts[static_cast<std::size_t>(h * I + i)]; };

  // This process's pairs run by expert, then home rank, so their instances are the runs of the
  // groups in that order, each group's in the order of its expert's instances.
  int64_t assigned = 0;
  // At most a run per (home rank here, instance): the list grows once.
  layout.runs.reserve(static_cast<std::size_t>(process.ranks_per_process * I));
  for (int64_t e = 0; e < table.num_experts(); ++e) {
    const InstanceList instances = table.instances_of(e);
    for (int64_t h = first; h < last; ++h) {
      for (const int64_t i : instances) {
        if (count(h, i) < 0)
          throw PlanError(
              fmt::format("the scalable plan routed {} pairs of home rank {} to instance {}",
                          count(h, i), h, i));
        if (count(h, i) == 0) continue;
        layout.runs.push_back({assigned, count(h, i), i, h, 0});
        assigned += count(h, i);
      }
    }
  }
  if (assigned != m)
    throw PlanError(fmt::format(
        "the scalable plan routed {} pairs homed on process {}'s ranks, which has {}: the "
        "routing's counts do not cover the pass's pairs",
        assigned, process.index, m));

  // Destination order here: by instance, each instance's runs in pair order (Note [Pair order]),
  // so the order is the runs' pair ranges end to end, and a run's rows are consecutive. Globally,
  // this process's rows of an instance begin after its rows homed on earlier ranks.
  std::vector<int64_t> row(layout.instance_offsets.begin(), layout.instance_offsets.end() - 1);
  for (int64_t h = 0; h < first; ++h)
    for (int64_t i = 0; i < I; ++i) row[static_cast<std::size_t>(i)] += count(h, i);
  // The runs by instance, each instance's in pair order: a counting sort of the runs.
  std::vector<std::size_t> by_instance(layout.runs.size());
  std::vector<std::size_t> next(static_cast<std::size_t>(I) + 1, 0);
  for (const PairRun& run : layout.runs) ++next[static_cast<std::size_t>(run.instance) + 1];
  std::partial_sum(next.begin(), next.end(), next.begin());
  for (std::size_t r = 0; r < layout.runs.size(); ++r)
    by_instance[next[static_cast<std::size_t>(layout.runs[r].instance)]++] = r;
  torch::Tensor order = torch::empty({m}, torch::kInt64);
  int64_t* pair = order.data_ptr<int64_t>();
  for (const std::size_t r : by_instance) {
    PairRun& run = layout.runs[r];
    run.first_row = row[static_cast<std::size_t>(run.instance)];
    row[static_cast<std::size_t>(run.instance)] += run.pairs;
    std::iota(pair, pair + run.pairs, run.first_pair);
    pair += run.pairs;
  }
  layout.order = order.to(device);
  // The instances, pair order: the runs' end to end. Written only for the chunks, the layout's
  // only reader of them: a pass's pairs once more, in memory fresh from the allocator.
  if (with_instances) {
    torch::Tensor instance = torch::empty({m}, torch::kInt64);
    int64_t* into = instance.data_ptr<int64_t>();
    for (const PairRun& run : layout.runs) into = std::fill_n(into, run.pairs, run.instance);
    layout.instance = instance.to(device);
  }

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

}  // namespace lrmoe
