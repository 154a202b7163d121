#include "core/pipeline/exchange_chunks.hpp"

#include <algorithm>
#include <numeric>

#include "core/pipeline/expert_counts.hpp"
#include "core/pipeline/stable_order.hpp"

namespace lrmoe {
namespace {

// [sum(counts)] int64: value v repeated counts[v] times.
torch::Tensor repeated_indices(const std::vector<int64_t>& counts, const torch::Device& device) {
  const torch::Tensor times = torch::tensor(counts, torch::kInt64);
  return torch::repeat_interleave(torch::arange(static_cast<int64_t>(counts.size())), times)
      .to(device);
}

}  // namespace

std::vector<int64_t> instance_chunks(const InstanceTable& table,
                                     const std::vector<int64_t>& instance_offsets, int64_t chunks) {
  const std::vector<int64_t>& rank = table.instance_rank;  // non-decreasing
  std::vector<int64_t> chunk(rank.size(), 0);
  for (std::size_t first = 0; first < rank.size();) {
    std::size_t end = first;
    while (end < rank.size() && rank[end] == rank[first]) ++end;
    const int64_t rows = instance_offsets[end] - instance_offsets[first];
    const auto count = static_cast<int64_t>(end - first);
    for (std::size_t i = first; i < end; ++i) {
      // Twice the row (or instance) at the instance's middle, against twice the rank's total.
      const int64_t middle = rows > 0 ? 2 * (instance_offsets[i] - instance_offsets[first]) +
                                            (instance_offsets[i + 1] - instance_offsets[i])
                                      : 2 * static_cast<int64_t>(i - first) + 1;
      const int64_t whole = rows > 0 ? 2 * rows : 2 * count;
      chunk[i] = std::min(chunks - 1, middle * chunks / whole);
    }
    first = end;
  }
  return chunk;
}

std::vector<int64_t> chunk_matrix(const std::vector<int64_t>& home_instance,
                                  const InstanceTable& table,
                                  const std::vector<int64_t>& instance_chunk, int64_t chunk,
                                  int64_t ranks) {
  const auto I = instance_chunk.size();
  std::vector<int64_t> in_chunk = home_instance;
  for (std::size_t j = 0; j < in_chunk.size(); ++j)
    if (instance_chunk[j % I] != chunk) in_chunk[j] = 0;
  return rank_matrix(in_chunk, table, ranks);
}

std::vector<ChunkSlice> split_slice(const ProcessSlice& slice, const torch::Tensor& pair_instance,
                                    const std::vector<int64_t>& instance_chunk, int64_t chunks) {
  const torch::Device device = slice.send_rows.device();
  const auto P = static_cast<int64_t>(slice.send_counts.size());
  const auto I = static_cast<int64_t>(instance_chunk.size());
  const torch::Tensor chunk_of = torch::tensor(instance_chunk, torch::kInt64).to(device);

  // Sending: each sent row's chunk, from its pair's instance, and its destination process (the
  // sent rows run by destination process).
  const torch::Tensor sent_chunk = chunk_of.index_select(
      0, pair_instance.index_select(0, slice.home_pairs.index_select(0, slice.send_rows)));
  const torch::Tensor sent_process = repeated_indices(slice.send_counts, device);
  // Receiving: each destination row's chunk, from its instance, and its source process (the
  // buffer runs by source).
  std::vector<int64_t> instance_rows;
  for (std::size_t i = 0; i + 1 < slice.instance_offsets.size(); ++i)
    instance_rows.push_back(slice.instance_offsets[i + 1] - slice.instance_offsets[i]);
  const torch::Tensor destination_chunk =
      chunk_of.index_select(0, repeated_indices(instance_rows, device));
  const int64_t rows = destination_chunk.numel();
  const torch::Tensor arrival =
      slice.arrival.defined() ? slice.arrival : identity_order(rows, sent_chunk.options());
  const torch::Tensor destination_source =
      repeated_indices(slice.recv_counts, device).index_select(0, arrival);
  const std::vector<std::vector<int64_t>> counts = host_counts(
      {{sent_chunk, chunks, sent_process, P}, {destination_chunk, chunks, destination_source, P}});
  // Rows grouped by chunk, each chunk's in order: one counting sort each, cut by the counts.
  const torch::Tensor sent_by_chunk = stable_order(sent_chunk, chunks);
  const torch::Tensor destination_by_chunk = stable_order(destination_chunk, chunks);
  // Each buffer row's place in its chunk's buffer: a chunk's buffer is the whole buffer's rows
  // of that chunk, in order (the first of chunk c's is at its chunk's start).
  torch::Tensor buffer_place;
  if (slice.arrival.defined()) {
    const torch::Tensor buffer_chunk =
        torch::empty_like(destination_chunk).index_copy_(0, arrival, destination_chunk);
    const torch::Tensor buffer_by_chunk = stable_order(buffer_chunk, chunks);
    buffer_place = inverse_permutation(buffer_by_chunk);
  }

  std::vector<ChunkSlice> split(static_cast<std::size_t>(chunks));
  int64_t sent_start = 0, received_start = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    ChunkSlice& k = split[static_cast<std::size_t>(c)];
    ProcessSlice& s = k.slice;
    s.home_pairs = slice.home_pairs;
    s.send_counts.assign(counts[0].begin() + c * P, counts[0].begin() + (c + 1) * P);
    s.recv_counts.assign(counts[1].begin() + c * P, counts[1].begin() + (c + 1) * P);
    s.first_row = slice.first_row;
    const int64_t sent = std::accumulate(s.send_counts.begin(), s.send_counts.end(), int64_t{0});
    const int64_t received =
        std::accumulate(s.recv_counts.begin(), s.recv_counts.end(), int64_t{0});
    k.sent_positions = sent_by_chunk.narrow(0, sent_start, sent);
    s.send_rows = slice.send_rows.index_select(0, k.sent_positions);
    k.destination_positions = destination_by_chunk.narrow(0, received_start, received);
    if (slice.arrival.defined()) {
      s.arrival = buffer_place.index_select(0, arrival.index_select(0, k.destination_positions)) -
                  received_start;
    }
    sent_start += sent;
    received_start += received;
    s.instance_offsets.assign(1, 0);
    for (int64_t i = 0; i < I; ++i) {
      const int64_t n = instance_chunk[static_cast<std::size_t>(i)] == c
                            ? instance_rows[static_cast<std::size_t>(i)]
                            : 0;
      s.instance_offsets.push_back(s.instance_offsets.back() + n);
    }
  }
  return split;
}

}  // namespace lrmoe
