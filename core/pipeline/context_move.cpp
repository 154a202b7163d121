#include "core/pipeline/context_move.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "core/pipeline/stable_order.hpp"

namespace lrmoe {
namespace {

// [rows] int64: the instance of each of the global backward destination rows `rows` ([rows]
// int64): instance i holds [offsets[i], offsets[i + 1]).
torch::Tensor instance_of_rows(const std::vector<int64_t>& instance_offsets,
                               const torch::Tensor& rows) {
  const torch::Tensor offsets = torch::tensor(instance_offsets, torch::kInt64).to(rows.device());
  return torch::searchsorted(offsets, rows, /*out_int32=*/false, /*right=*/true) - 1;
}

}  // namespace

ContextSources context_sources(const PairLayout& forward, const torch::Tensor& kept,
                               const PairLayout& backward, const InstanceTable& table,
                               const ProcessView& process, bool by_instance) {
  const int64_t R = forward.ranks, I = table.size();
  const int64_t columns = by_instance ? I : R;
  const torch::Tensor positions = kept.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t k = positions.numel();
  const int64_t* pair = positions.data_ptr<int64_t>();
  ContextSources sources;
  sources.home_forward.assign(static_cast<std::size_t>(R * R), 0);
  sources.forward_backward.assign(static_cast<std::size_t>(R * columns), 0);
  torch::Tensor forward_row = torch::empty({k}, torch::kInt64);
  torch::Tensor forward_process = torch::empty({k}, torch::kInt64);
  int64_t* row = forward_row.data_ptr<int64_t>();
  int64_t* source = forward_process.data_ptr<int64_t>();
  // The kept pairs of a forward run are consecutive among the kept, as are a backward run's
  // (whose pairs are the kept): both walk [0, k) in step.
  int64_t j = 0;
  std::size_t b = 0;
  for (const PairRun& run : forward.runs) {
    const int64_t end = std::lower_bound(pair + j, pair + k, run.first_pair + run.pairs) - pair;
    if (j < end && pair[j] < run.first_pair)
      throw PlanError(
          fmt::format("the context move: kept pair {} lies in no forward run", pair[j]));
    const int64_t s = table.instance_rank[static_cast<std::size_t>(run.instance)];
    const int64_t shift = run.first_row - run.first_pair;
    for (int64_t x = j; x < end; ++x) row[x] = pair[x] + shift;
    std::fill(source + j, source + end, process.process_of(s));
    sources.home_forward[static_cast<std::size_t>(run.home_rank * R + s)] += end - j;
    while (j < end) {
      while (b < backward.runs.size() && backward.runs[b].first_pair + backward.runs[b].pairs <= j)
        ++b;
      if (b == backward.runs.size())
        throw PlanError(fmt::format("the context move: kept pair {} lies in no backward run", j));
      const PairRun& to = backward.runs[b];
      const int64_t stop = std::min(end, to.first_pair + to.pairs);
      const int64_t d =
          by_instance ? to.instance : table.instance_rank[static_cast<std::size_t>(to.instance)];
      sources.forward_backward[static_cast<std::size_t>(s * columns + d)] += stop - j;
      j = stop;
    }
  }
  if (j != k)
    throw PlanError(
        fmt::format("the context move: {} of {} kept pairs lie in a forward run", j, k));
  const torch::Device device = kept.device();
  sources.forward_row = forward_row.to(device);
  sources.forward_process = forward_process.to(device);
  return sources;
}

ContextMove context_move(Collectives& collectives, const torch::Tensor& forward_row,
                         const torch::Tensor& backward_row, const torch::Tensor& forward_process,
                         const PairLayout& backward, const std::vector<int64_t>& by_forward_rank,
                         const std::vector<int64_t>& home_forward, int64_t forward_first_row,
                         const InstanceTable& table, const ProcessView& process,
                         bool with_instances) {
  ContextMove move;
  // The counts are those of the exact plan's move: from forward ranks to backward ranks, into
  // the backward layout's rows here.
  move.slice = slice_counts(backward.instance_offsets, by_forward_rank, table, process);
  if (process.processes == 1) {
    // Everything is here: the kept pairs' forward rows, taken in backward destination order.
    move.slice.home_pairs = identity_order(forward_row.numel(), forward_row.options());
    move.slice.send_rows = backward.order;
    move.rows = forward_row;
    if (with_instances) move.instance = backward.instance;
    return move;
  }
  const int64_t ranks = process.processes * process.ranks_per_process;

  // 1. Each kept pair's two rows to its forward process, which holds its pre-activations.
  std::vector<int64_t> send_counts, recv_counts;
  for (int64_t q = 0; q < process.processes; ++q) {
    send_counts.push_back(process_pairs(home_forward, ranks, process, process.index, q));
    recv_counts.push_back(process_pairs(home_forward, ranks, process, q, process.index));
  }
  // With them, in the same call (Note [Fused dispatch]): the forward process of each kept pair,
  // along the backward layout, which orders the rows when they arrive (3.).
  const ProcessSlice& b = backward.local;
  const std::vector<torch::Tensor> received = collectives.exchange_messages(
      {{take_columns({forward_row, backward_row}, stable_order(forward_process, process.processes)),
        send_counts, recv_counts},
       {take_rows(forward_process, b.send_rows).unsqueeze(1), b.send_counts, b.recv_counts}});
  const torch::Tensor& told = received[0];

  // 2. Here, the rows to send in backward destination order, which groups them by destination
  // process as the all-to-all-v sends them.
  const int64_t sent = told.size(0);
  const int64_t planned =
      std::accumulate(move.slice.send_counts.begin(), move.slice.send_counts.end(), int64_t{0});
  if (sent != planned)
    throw PlanError(fmt::format(
        "the scalable plan's context move: process {} was told of {} kept pairs to send, the "
        "summed counts say {}",
        process.index, sent, planned));
  const torch::Tensor told_row = told.select(1, 1);  // the backward rows, as told
  const torch::Tensor by_backward_row = stable_order(told_row, backward.instance_offsets.back());
  move.rows = take_rows(told.select(1, 0), by_backward_row).sub_(forward_first_row);
  move.slice.home_pairs = move.slice.send_rows = identity_order(sent, move.rows.options());
  if (with_instances)
    move.instance =
        instance_of_rows(backward.instance_offsets, take_rows(told_row, by_backward_row));

  // 3. The rows arrive by forward process, then in backward destination order: each
  // destination row's forward process orders the buffer.
  torch::Tensor source = received[1].squeeze(1);
  if (b.arrival.defined()) source = take_rows(source, b.arrival);
  move.slice.arrival = inverse_permutation(stable_order(source, process.processes));
  return move;
}

ContextMove context_in_place(const PairLayout& layout, const std::vector<int64_t>& by_forward_rank,
                             const InstanceTable& table, const ProcessView& process,
                             bool with_instances) {
  ContextMove move;
  move.slice = slice_counts(layout.instance_offsets, by_forward_rank, table, process);
  const int64_t here =
      std::accumulate(move.slice.recv_counts.begin(), move.slice.recv_counts.end(), int64_t{0});
  const torch::Tensor rows = identity_order(here, layout.order.options());
  move.slice.home_pairs = move.slice.send_rows = move.rows = rows;
  if (with_instances)
    move.instance = instance_of_rows(layout.instance_offsets, rows + move.slice.first_row);
  return move;
}

}  // namespace lrmoe
