// Chunks of a pass's exchanges (Note [Chunked exchange]): each rank's instances in contiguous
// groups of about equal rows, and slices of chunks that put together give the whole slice's rows
// in its orders, on every process of a layout.
#include <catch2/catch.hpp>

#include "core/pipeline/exchange_chunks.hpp"
#include "core/pipeline/pair_layout.hpp"

using namespace lrmoe;

namespace {

// Two ranks with three instances each (expert e on rank e / 3).
InstanceTable two_ranks_of_three() {
  PlacementPlan plan;
  for (int64_t e = 0; e < 6; ++e) plan.instances.push_back({e, e / 3, e % 3, true});
  plan.quota.assign(6, 1);
  InstanceTable table = build_instance_table(plan, 6, 2, 3, "test");
  table.place_on(torch::kCPU);
  return table;
}

}  // namespace

TEST_CASE("each rank's instances go in contiguous chunks of about equal rows", "[chunks]") {
  const InstanceTable table = two_ranks_of_three();
  // Rank 0: rows 10, 10, 10; rank 1: 28, 1, 1.
  const std::vector<int64_t> offsets{0, 10, 20, 30, 58, 59, 60};
  CHECK(instance_chunks(table, offsets, 1) == std::vector<int64_t>{0, 0, 0, 0, 0, 0});
  // Rank 0 cut at 10 and 20 of its 30 rows; rank 1's first instance is most of its rows.
  CHECK(instance_chunks(table, offsets, 3) == std::vector<int64_t>{0, 1, 2, 1, 2, 2});
  CHECK(instance_chunks(table, offsets, 2) == std::vector<int64_t>{0, 1, 1, 0, 1, 1});
  // A rank without rows cuts by count.
  const std::vector<int64_t> idle{0, 0, 0, 0, 5, 10, 15};
  CHECK(instance_chunks(table, idle, 3) == std::vector<int64_t>{0, 1, 2, 0, 1, 2});
  // A chunk's matrix counts its instances' pairs only.
  const std::vector<int64_t> home_instance{1, 2, 3, 4,  5,  6,  // from rank 0
                                           7, 8, 9, 10, 11, 12};
  const std::vector<int64_t> chunk{0, 1, 1, 0, 1, 1};
  CHECK(chunk_matrix(home_instance, table, chunk, 0, 2) == std::vector<int64_t>{1, 4, 7, 10});
  CHECK(chunk_matrix(home_instance, table, chunk, 1, 2) == std::vector<int64_t>{5, 11, 17, 23});
}

TEST_CASE("chunk slices put together give the whole slice's rows in its orders", "[chunks]") {
  const InstanceTable table = two_ranks_of_three();
  // 40 pairs with made-up instances and home ranks.
  const torch::Tensor instance = torch::arange(40, torch::kInt64).mul(7).remainder(6);
  const torch::Tensor home = torch::arange(40, torch::kInt64).mul(5).remainder(3).remainder(2);
  for (const int64_t processes : {1, 2}) {
    for (int64_t index = 0; index < processes; ++index) {
      ProcessView view;
      view.processes = processes;
      view.index = index;
      view.ranks_per_process = 2 / processes;
      INFO("process " << index << " of " << processes);
      const PairLayout layout = build_pair_layout(instance, home, table, 2, view);
      const ProcessSlice& whole = layout.local;
      const int64_t chunks = 3;
      const std::vector<int64_t> chunk_of = instance_chunks(table, layout.instance_offsets, chunks);
      const std::vector<ChunkSlice> split = split_slice(whole, instance, chunk_of, chunks);
      REQUIRE(split.size() == 3);
      // The whole receive buffer as row numbers: what each destination row holds.
      const int64_t rows = whole.instance_offsets.back();
      const torch::Tensor buffer = torch::arange(rows, torch::kInt64);
      const torch::Tensor whole_rows =
          whole.arrival.defined() ? buffer.index_select(0, whole.arrival) : buffer;
      std::vector<int64_t> sent(static_cast<std::size_t>(whole.send_rows.numel()), 0);
      std::vector<int64_t> received(static_cast<std::size_t>(rows), 0);
      for (int64_t c = 0; c < chunks; ++c) {
        const ChunkSlice& k = split[static_cast<std::size_t>(c)];
        CHECK(k.slice.send_rows.equal(whole.send_rows.index_select(0, k.sent_positions)));
        CHECK(k.slice.send_counts.size() == static_cast<std::size_t>(processes));
        // A chunk's buffer is the whole buffer's rows of the chunk, by source then in order.
        const torch::Tensor in_chunk =
            torch::zeros({rows}, torch::kBool).index_fill_(0, k.destination_positions, true);
        const torch::Tensor chunk_buffer = buffer.index_select(
            0,
            torch::nonzero(in_chunk.index_select(
                               0, whole.arrival.defined() ? torch::argsort(whole.arrival) : buffer))
                .flatten());
        const torch::Tensor chunk_rows = k.slice.arrival.defined()
                                             ? chunk_buffer.index_select(0, k.slice.arrival)
                                             : chunk_buffer;
        CHECK(chunk_rows.equal(whole_rows.index_select(0, k.destination_positions)));
        // Its instance offsets count its instances' rows only, from 0.
        CHECK(k.slice.instance_offsets.back() == k.destination_positions.numel());
        for (std::size_t i = 0; i < chunk_of.size(); ++i) {
          const int64_t n = k.slice.instance_offsets[i + 1] - k.slice.instance_offsets[i];
          if (chunk_of[i] != c) CHECK(n == 0);
          if (chunk_of[i] == c)
            CHECK(n == whole.instance_offsets[i + 1] - whole.instance_offsets[i]);
        }
        for (int64_t p :
             std::vector<int64_t>(k.sent_positions.data_ptr<int64_t>(),
                                  k.sent_positions.data_ptr<int64_t>() + k.sent_positions.numel()))
          ++sent[static_cast<std::size_t>(p)];
        for (int64_t p : std::vector<int64_t>(
                 k.destination_positions.data_ptr<int64_t>(),
                 k.destination_positions.data_ptr<int64_t>() + k.destination_positions.numel()))
          ++received[static_cast<std::size_t>(p)];
      }
      // Every row in exactly one chunk.
      CHECK(std::all_of(sent.begin(), sent.end(), [](int64_t n) { return n == 1; }));
      CHECK(std::all_of(received.begin(), received.end(), [](int64_t n) { return n == 1; }));
    }
  }
}
