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

// The home's index messages: [k, 2] int64 rows (forward row, backward row) of its kept pairs,
// grouped by forward process, each group in backward row order (the segments by forward process,
// then by backward row); and [k, 1] int64 the forward process of each kept pair in backward row
// order, which is the backward layout's destination order here. Both on the host.
struct HomeMessages {
  torch::Tensor rows;
  torch::Tensor forward_process;
};

HomeMessages home_messages(const ContextSources& sources, const std::vector<int64_t>& send_counts,
                           const ProcessView& process) {
  const auto P = static_cast<std::size_t>(process.processes);
  const int64_t k = sources.kept.numel();
  const int64_t* pair = sources.kept.data_ptr<int64_t>();
  std::vector<const ContextSegment*> by_row;
  for (const ContextSegment& segment : sources.segments) by_row.push_back(&segment);
  std::sort(by_row.begin(), by_row.end(), [](const ContextSegment* a, const ContextSegment* b) {
    return a->backward_row < b->backward_row;
  });
  std::vector<int64_t> at(P + 1, 0);  // where each forward process's rows begin
  for (const ContextSegment& segment : sources.segments)
    at[static_cast<std::size_t>(segment.forward_process) + 1] += segment.pairs;
  std::partial_sum(at.begin(), at.end(), at.begin());
  for (std::size_t q = 0; q < P; ++q)
    if (at[q + 1] - at[q] != send_counts[q])
      throw PlanError(
          fmt::format("the scalable plan's context move: process {} keeps {} pairs of process {}'s "
                      "pre-activations, the summed counts say {}",
                      process.index, at[q + 1] - at[q], q, send_counts[q]));
  HomeMessages messages{torch::empty({k, 2}, torch::kInt64), torch::empty({k, 1}, torch::kInt64)};
  int64_t* told = messages.rows.data_ptr<int64_t>();
  int64_t* source_of = messages.forward_process.data_ptr<int64_t>();
  for (const ContextSegment* segment : by_row) {
    // The segment's fields in locals: the loop stores int64 values, which could alias them as
    // far as the compiler knows, and it reloaded all four for every pair.
    const int64_t pairs = segment->pairs, shift = segment->forward_shift;
    const int64_t first_row = segment->backward_row;
    const int64_t* from = pair + segment->first_kept;
    int64_t& next = at[static_cast<std::size_t>(segment->forward_process)];
    int64_t* into = told + 2 * next;
    for (int64_t x = 0; x < pairs; ++x) {
      into[2 * x] = from[x] + shift;
      into[2 * x + 1] = first_row + x;
    }
    next += pairs;
    source_of = std::fill_n(source_of, pairs, segment->forward_process);
  }
  return messages;
}

// At the forward process: [planned] int64, the rows here (less `forward_first_row`) to send in
// backward destination order, from `told` [planned, 2] int64 on the host, the home processes'
// rows (forward row, backward row), `recv_counts[q]` from each q in process order. Each home
// process's rows came in backward row order, and within an instance the home processes' rows
// follow each other in process order (Note [Pair order]): instance by instance, each home
// process's rows of it, in turn. `instance`: when given, set to each row's backward instance.
torch::Tensor rows_to_send(const torch::Tensor& told, int64_t planned,
                           const std::vector<int64_t>& recv_counts,
                           const std::vector<int64_t>& instance_offsets, int64_t forward_first_row,
                           const ProcessView& process, torch::Tensor* instance) {
  const int64_t sent = told.size(0);
  if (sent != planned)
    throw PlanError(fmt::format(
        "the scalable plan's context move: process {} was told of {} kept pairs to send, the "
        "summed counts say {}",
        process.index, sent, planned));
  const auto P = static_cast<std::size_t>(process.processes);
  const int64_t* row_pair = told.data_ptr<int64_t>();
  std::vector<int64_t> next(P), end(P);  // each home process's rows left in `told`
  for (std::size_t q = 0, from = 0; q < P; from += static_cast<std::size_t>(recv_counts[q++])) {
    next[q] = static_cast<int64_t>(from);
    end[q] = next[q] + recv_counts[q];
  }
  torch::Tensor rows = torch::empty({sent}, torch::kInt64);
  if (instance) *instance = torch::empty({sent}, torch::kInt64);
  int64_t* row = rows.data_ptr<int64_t>();
  int64_t* row_instance = instance ? instance->data_ptr<int64_t>() : nullptr;
  int64_t placed = 0;
  std::vector<int64_t> last(P, -1);  // each home process's last backward row taken
  for (std::size_t i = 0; i + 1 < instance_offsets.size(); ++i) {
    const int64_t bound = instance_offsets[i + 1];
    for (std::size_t q = 0; q < P; ++q) {
      // The cursors in locals while the rows are written (int64 stores the compiler cannot tell
      // from them), and back once the instance's rows from q are taken.
      int64_t at = next[q], previous = last[q];
      const int64_t stop = end[q];
      for (; at < stop && row_pair[2 * at + 1] < bound; ++at) {
        if (row_pair[2 * at + 1] <= previous)
          throw PlanError(fmt::format(
              "the scalable plan's context move: process {} was told process {}'s backward rows "
              "out of order",
              process.index, q));
        previous = row_pair[2 * at + 1];
        row[placed] = row_pair[2 * at] - forward_first_row;
        if (row_instance) row_instance[placed] = static_cast<int64_t>(i);
        ++placed;
      }
      next[q] = at;
      last[q] = previous;
    }
  }
  if (placed != sent)
    throw PlanError(fmt::format(
        "the scalable plan's context move: process {} was told of backward rows out of order or "
        "past the layout's {}",
        process.index, instance_offsets.back()));
  return rows;
}

// At the backward process: [rows here] int64 on the host, where each destination row arrives in
// the receive buffer, which holds the rows by forward process, then in backward destination
// order: where its forward process's rows begin, plus that process's rows before it.
// `forward_process`: [rows here] int64 each row's forward process as received along the
// backward layout, whose `layout_arrival` (if defined) says where each destination row came.
torch::Tensor arrival_by_source(const torch::Tensor& forward_process,
                                const torch::Tensor& layout_arrival,
                                const std::vector<int64_t>& recv_counts,
                                const ProcessView& process) {
  const torch::Tensor source = forward_process.to(torch::kCPU).contiguous();
  const torch::Tensor source_row =
      layout_arrival.defined() ? layout_arrival.to(torch::kCPU).contiguous() : torch::Tensor();
  const int64_t rows_here = source.numel();
  std::vector<int64_t> buffer_row(recv_counts.size() + 1, 0);
  std::partial_sum(recv_counts.begin(), recv_counts.end(), buffer_row.begin() + 1);
  const std::vector<int64_t> buffer_end(buffer_row.begin() + 1, buffer_row.end());
  if (buffer_row.back() != rows_here)
    throw PlanError(
        fmt::format("the scalable plan's context move: process {} computes {} rows, receives {}",
                    process.index, rows_here, buffer_row.back()));
  torch::Tensor arrival = torch::empty({rows_here}, torch::kInt64);
  int64_t* place = arrival.data_ptr<int64_t>();
  const int64_t* from = source.data_ptr<int64_t>();
  const int64_t* at_row = source_row.defined() ? source_row.data_ptr<int64_t>() : nullptr;
  const int64_t processes = process.processes;  // read once: the stores below could alias it
  for (int64_t d = 0; d < rows_here; ++d) {
    const int64_t q = from[at_row ? at_row[d] : d];
    if (q < 0 || q >= processes ||
        buffer_row[static_cast<std::size_t>(q)] >= buffer_end[static_cast<std::size_t>(q)])
      throw PlanError(fmt::format(
          "the scalable plan's context move: process {} was sent more rows from process {} than "
          "the summed counts say",
          process.index, q));
    place[d] = buffer_row[static_cast<std::size_t>(q)]++;
  }
  return arrival;
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
                                  to.first_row + (j - to.first_pair)});
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
  std::vector<int64_t> send_counts, recv_counts;
  for (int64_t q = 0; q < process.processes; ++q) {
    send_counts.push_back(process_pairs(home_forward, ranks, process, process.index, q));
    recv_counts.push_back(process_pairs(home_forward, ranks, process, q, process.index));
  }
  // 1. Each kept pair's two rows to its forward process, which holds its pre-activations; with
  // them, in the same call (Note [Fused dispatch]), the forward process of each kept pair along
  // the backward layout, which orders the rows when they arrive (3.).
  const HomeMessages home = home_messages(sources, send_counts, process);
  const ProcessSlice& b = backward.local;
  const std::vector<torch::Tensor> received = collectives.exchange_messages(
      {{home.rows.to(device), send_counts, recv_counts},
       {home.forward_process.to(device), b.send_counts, b.recv_counts}});
  // 2. Here, the rows to send in backward destination order, which groups them by destination
  // process as the all-to-all-v sends them.
  const int64_t planned =
      std::accumulate(move.slice.send_counts.begin(), move.slice.send_counts.end(), int64_t{0});
  torch::Tensor instance;
  move.rows = rows_to_send(received[0].to(torch::kCPU).contiguous(), planned, recv_counts,
                           backward.instance_offsets, forward_first_row, process,
                           with_instances ? &instance : nullptr)
                  .to(device);
  move.slice.home_pairs = move.slice.send_rows = identity_order(planned, move.rows.options());
  if (with_instances) move.instance = instance.to(device);
  // 3. Where each row arrives.
  move.slice.arrival =
      arrival_by_source(received[1].squeeze(1), b.arrival, move.slice.recv_counts, process)
          .to(device);
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
