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

// [k] int64 on the host: each kept pair's forward destination row, in kept order, from its
// segment.
torch::Tensor forward_rows(const ContextSources& sources) {
  const int64_t k = sources.kept.numel();
  const int64_t* pair = sources.kept.data_ptr<int64_t>();
  torch::Tensor rows = torch::empty({k}, torch::kInt64);
  int64_t* row = rows.data_ptr<int64_t>();
  for (const ContextSegment& segment : sources.segments)
    for (int64_t x = segment.first_kept; x < segment.first_kept + segment.pairs; ++x)
      row[x] = pair[x] + segment.forward_shift;
  return rows;
}

}  // namespace

ContextSources context_sources(const PairLayout& forward, const torch::Tensor& kept,
                               const PairLayout& backward, const InstanceTable& table,
                               const ProcessView& process, bool by_instance) {
  const int64_t R = forward.ranks, I = table.size();
  const int64_t columns = by_instance ? I : R;
  ContextSources sources;
  sources.kept = kept.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t k = sources.kept.numel();
  const int64_t* pair = sources.kept.data_ptr<int64_t>();
  sources.home_forward.assign(static_cast<std::size_t>(R * R), 0);
  sources.forward_backward.assign(static_cast<std::size_t>(R * columns), 0);
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
    sources.home_forward[static_cast<std::size_t>(run.home_rank * R + s)] += end - j;
    while (j < end) {
      while (b < backward.runs.size() && backward.runs[b].first_pair + backward.runs[b].pairs <= j)
        ++b;
      if (b == backward.runs.size())
        throw PlanError(fmt::format("the context move: kept pair {} lies in no backward run", j));
      const PairRun& to = backward.runs[b];
      const int64_t stop = std::min(end, to.first_pair + to.pairs);
      sources.segments.push_back({j, stop - j, process.process_of(s),
                                  run.first_row - run.first_pair,
                                  to.first_row + (j - to.first_pair), to.instance});
      const int64_t d =
          by_instance ? to.instance : table.instance_rank[static_cast<std::size_t>(to.instance)];
      sources.forward_backward[static_cast<std::size_t>(s * columns + d)] += stop - j;
      j = stop;
    }
  }
  if (j != k)
    throw PlanError(
        fmt::format("the context move: {} of {} kept pairs lie in a forward run", j, k));
  return sources;
}

ContextMove context_move(Collectives& collectives, const ContextSources& sources,
                         const PairLayout& backward, const std::vector<int64_t>& by_forward_rank,
                         const std::vector<int64_t>& home_forward, int64_t forward_first_row,
                         const InstanceTable& table, const ProcessView& process,
                         const torch::Device& device, bool with_instances) {
  ContextMove move;
  // The counts are those of the exact plan's move: from forward ranks to backward ranks, into
  // the backward layout's rows here.
  move.slice = slice_counts(backward.instance_offsets, by_forward_rank, table, process);
  if (process.processes == 1) {
    // Everything is here: the kept pairs' forward rows, taken in backward destination order.
    move.rows = forward_rows(sources).to(device);
    move.slice.home_pairs = identity_order(move.rows.numel(), move.rows.options());
    move.slice.send_rows = backward.order;
    if (with_instances) move.instance = backward.instance;
    return move;
  }
  const int64_t ranks = process.processes * process.ranks_per_process;
  const auto P = static_cast<std::size_t>(process.processes);
  const int64_t* pair = sources.kept.data_ptr<int64_t>();

  // 1. Each kept pair's two rows to its forward process, which holds its pre-activations, in
  // backward row order: the segments by forward process, then by backward row.
  std::vector<int64_t> send_counts, recv_counts;
  for (int64_t q = 0; q < process.processes; ++q) {
    send_counts.push_back(process_pairs(home_forward, ranks, process, process.index, q));
    recv_counts.push_back(process_pairs(home_forward, ranks, process, q, process.index));
  }
  std::vector<const ContextSegment*> by_row;
  for (const ContextSegment& segment : sources.segments) by_row.push_back(&segment);
  std::sort(by_row.begin(), by_row.end(), [](const ContextSegment* a, const ContextSegment* b) {
    return a->backward_row < b->backward_row;
  });
  const int64_t k = sources.kept.numel();
  torch::Tensor told_rows = torch::empty({k, 2}, torch::kInt64);
  std::vector<int64_t> at(P + 1, 0);  // where each forward process's rows begin in told_rows
  for (const ContextSegment& segment : sources.segments)
    at[static_cast<std::size_t>(segment.forward_process) + 1] += segment.pairs;
  std::partial_sum(at.begin(), at.end(), at.begin());
  for (std::size_t q = 0; q < P; ++q)
    if (at[q + 1] - at[q] != send_counts[q])
      throw PlanError(
          fmt::format("the scalable plan's context move: process {} keeps {} pairs of process {}'s "
                      "pre-activations, the summed counts say {}",
                      process.index, at[q + 1] - at[q], q, send_counts[q]));
  // With them, in the same call (Note [Fused dispatch]): the forward process of each kept pair,
  // along the backward layout (its destination order here, backward row order), which orders
  // the rows when they arrive (3.).
  torch::Tensor forward_process = torch::empty({k, 1}, torch::kInt64);
  int64_t* told = told_rows.data_ptr<int64_t>();
  int64_t* source_of = forward_process.data_ptr<int64_t>();
  for (const ContextSegment* segment : by_row) {
    int64_t* into = told + 2 * at[static_cast<std::size_t>(segment->forward_process)];
    for (int64_t x = 0; x < segment->pairs; ++x) {
      into[2 * x] = pair[segment->first_kept + x] + segment->forward_shift;
      into[2 * x + 1] = segment->backward_row + x;
    }
    at[static_cast<std::size_t>(segment->forward_process)] += segment->pairs;
    source_of = std::fill_n(source_of, segment->pairs, segment->forward_process);
  }
  const ProcessSlice& b = backward.local;
  const std::vector<torch::Tensor> received =
      collectives.exchange_messages({{told_rows.to(device), send_counts, recv_counts},
                                     {forward_process.to(device), b.send_counts, b.recv_counts}});

  // 2. Here, the rows to send in backward destination order, which groups them by destination
  // process as the all-to-all-v sends them. Each home process's rows came in backward row order,
  // and within an instance the home processes' rows follow each other in process order (Note
  // [Pair order]): instance by instance, each home process's rows of it, in turn.
  const torch::Tensor told_here = received[0].to(torch::kCPU).contiguous();
  const int64_t sent = told_here.size(0);
  const int64_t planned =
      std::accumulate(move.slice.send_counts.begin(), move.slice.send_counts.end(), int64_t{0});
  if (sent != planned)
    throw PlanError(fmt::format(
        "the scalable plan's context move: process {} was told of {} kept pairs to send, the "
        "summed counts say {}",
        process.index, sent, planned));
  const int64_t* row_pair = told_here.data_ptr<int64_t>();
  std::vector<int64_t> next(P), end(P);  // each home process's rows left in told_here
  for (std::size_t q = 0, from = 0; q < P; from += static_cast<std::size_t>(recv_counts[q++])) {
    next[q] = static_cast<int64_t>(from);
    end[q] = next[q] + recv_counts[q];
  }
  torch::Tensor rows = torch::empty({sent}, torch::kInt64);
  torch::Tensor instance = torch::empty({with_instances ? sent : 0}, torch::kInt64);
  int64_t* row = rows.data_ptr<int64_t>();
  int64_t* row_instance = instance.data_ptr<int64_t>();
  int64_t placed = 0;
  for (int64_t i = 0; i < table.size(); ++i) {
    const int64_t bound = backward.instance_offsets[static_cast<std::size_t>(i + 1)];
    for (std::size_t q = 0; q < P; ++q) {
      for (; next[q] < end[q] && row_pair[2 * next[q] + 1] < bound; ++next[q]) {
        row[placed] = row_pair[2 * next[q]] - forward_first_row;
        if (with_instances) row_instance[placed] = i;
        ++placed;
      }
    }
  }
  if (placed != sent)
    throw PlanError(fmt::format(
        "the scalable plan's context move: process {} was told of backward rows out of order or "
        "past the layout's {}",
        process.index, backward.instance_offsets.back()));
  move.rows = rows.to(device);
  move.slice.home_pairs = move.slice.send_rows = identity_order(sent, move.rows.options());
  if (with_instances) move.instance = instance.to(device);

  // 3. The rows arrive by forward process, then in backward destination order: a destination
  // row's place in the buffer is where its forward process's rows begin, plus the rows of that
  // process before it.
  const torch::Tensor source = received[1].squeeze(1).to(torch::kCPU).contiguous();
  const torch::Tensor source_row =
      b.arrival.defined() ? b.arrival.to(torch::kCPU).contiguous() : torch::Tensor();
  const int64_t rows_here = source.numel();
  std::vector<int64_t> buffer_row(P + 1, 0);
  std::partial_sum(move.slice.recv_counts.begin(), move.slice.recv_counts.end(),
                   buffer_row.begin() + 1);
  const std::vector<int64_t> buffer_end(buffer_row.begin() + 1, buffer_row.end());
  if (buffer_row.back() != rows_here)
    throw PlanError(
        fmt::format("the scalable plan's context move: process {} computes {} rows, receives {}",
                    process.index, rows_here, buffer_row.back()));
  torch::Tensor arrival = torch::empty({rows_here}, torch::kInt64);
  int64_t* place = arrival.data_ptr<int64_t>();
  const int64_t* from = source.data_ptr<int64_t>();
  const int64_t* at_row = source_row.defined() ? source_row.data_ptr<int64_t>() : nullptr;
  for (int64_t d = 0; d < rows_here; ++d) {
    const int64_t q = from[at_row ? at_row[d] : d];
    if (q < 0 || q >= process.processes ||
        buffer_row[static_cast<std::size_t>(q)] >= buffer_end[static_cast<std::size_t>(q)])
      throw PlanError(fmt::format(
          "the scalable plan's context move: process {} was sent more rows from process {} than "
          "the summed counts say",
          process.index, q));
    place[d] = buffer_row[static_cast<std::size_t>(q)]++;
  }
  move.slice.arrival = arrival.to(device);
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
