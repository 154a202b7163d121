// The pair exchange's record of its own calls (core/pipeline/pair_exchange.hpp), which `lrmoe
// bench-parallel` replays bare and uses to tell the time spent waiting for a peer from a call's
// own: the sizes must be the bytes that moved, and the entry and exit times of processes on one
// host must be comparable.

#include <catch2/catch.hpp>

#include <memory>

#include "core/pipeline/pair_exchange.hpp"
#include "support/in_processes.hpp"

using namespace lrmoe;
using lrmoe_test::in_processes;

TEST_CASE("The exchange logs each call's bytes per process and times its peers can compare",
          "[distributed]") {
  constexpr int64_t kWidth = 4;  // float32 columns: 16 bytes a row
  const std::vector<int> codes = in_processes(2, [](Collectives& collectives) {
    const int64_t me = collectives.rank(), peer = 1 - me;
    // Process p keeps 1 + p rows and sends 2 + 3 p to the other; each row holds its sender.
    const std::vector<int64_t> send_rows =
        me == 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{5, 2};
    const std::vector<int64_t> recv_rows =
        me == 0 ? std::vector<int64_t>{1, 5} : std::vector<int64_t>{2, 2};
    ProcessSlice slice;
    slice.send_counts = send_rows;
    slice.recv_counts = recv_rows;
    const int64_t sent = send_rows[0] + send_rows[1];
    slice.send_rows = torch::arange(sent, torch::kInt64);
    const torch::Tensor rows = torch::full({sent, kWidth}, static_cast<float>(me));

    PairExchange exchange(std::shared_ptr<Collectives>(&collectives, [](Collectives*) {}));
    const torch::Tensor received = exchange.dispatch(rows, slice);
    TimedSpans spans;
    const ExchangeMeasurement measured = exchange.take_measurement(spans);

    const int64_t row_bytes = kWidth * 4;
    bool ok = received.size(0) == recv_rows[0] + recv_rows[1] &&
              received.narrow(0, recv_rows[0], recv_rows[1])
                  .eq(static_cast<float>(1))
                  .all()
                  .item<bool>() &&
              received.narrow(0, 0, recv_rows[0]).eq(static_cast<float>(0)).all().item<bool>();
    ok = ok && measured.calls == 1 && measured.call_log.size() == 1 &&
         measured.bytes_sent == send_rows[static_cast<std::size_t>(peer)] * row_bytes &&
         measured.bytes_received == recv_rows[static_cast<std::size_t>(peer)] * row_bytes;
    if (!ok) return false;
    const ExchangeCall& call = measured.call_log.front();
    ok = call.sent_bytes ==
             std::vector<int64_t>{send_rows[0] * row_bytes, send_rows[1] * row_bytes} &&
         call.received_bytes ==
             std::vector<int64_t>{recv_rows[0] * row_bytes, recv_rows[1] * row_bytes} &&
         call.entered_ns <= call.left_ns;

    // Each process receives rows from the other, so neither can leave the call before the
    // other entered it: the host clock is one clock for every process of the host.
    torch::Tensor times = torch::tensor({call.entered_ns, call.left_ns}, torch::kInt64);
    const torch::Tensor both = collectives.gather_rows(times, std::vector<int64_t>{2, 2});
    const int64_t peer_entered = both[2 * peer].item<int64_t>();
    return ok && call.left_ns >= peer_entered;
  });
  CHECK(codes == std::vector<int>{0, 0});
}

namespace {

// A slice of `sent` rows in order, sending send_counts[q] to process q, receiving
// recv_counts[q] from it, arriving in reverse (the arrival permutation of a layout).
ProcessSlice reversed_arrival_slice(const std::vector<int64_t>& send_counts,
                                    const std::vector<int64_t>& recv_counts) {
  ProcessSlice slice;
  slice.send_counts = send_counts;
  slice.recv_counts = recv_counts;
  int64_t sent = 0, received = 0;
  for (const int64_t n : send_counts) sent += n;
  for (const int64_t n : recv_counts) received += n;
  slice.send_rows = torch::arange(sent, torch::kInt64).flip(0);
  slice.arrival = torch::arange(received, torch::kInt64).flip(0);
  return slice;
}

}  // namespace

TEST_CASE("Dispatching messages together delivers each as its own dispatch would, in one call",
          "[distributed]") {
  const std::vector<int> codes = in_processes(3, [](Collectives& collectives) {
    const int64_t me = collectives.rank();
    // Message a: (me + q) % 3 rows to process q, float32 rows of 3, picked from a longer source
    // by source_rows; message b: (2 me + q + 1) % 4 rows to q, int64 rows of 2 x 2. Some counts
    // are zero. Every value says where it came from.
    std::vector<int64_t> a_send, a_recv, b_send, b_recv;
    for (int64_t q = 0; q < 3; ++q) {
      a_send.push_back((me + q) % 3);
      a_recv.push_back((q + me) % 3);
      b_send.push_back((2 * me + q + 1) % 4);
      b_recv.push_back((2 * q + me + 1) % 4);
    }
    const ProcessSlice a = reversed_arrival_slice(a_send, a_recv);
    const ProcessSlice b = reversed_arrival_slice(b_send, b_recv);
    const int64_t a_rows = a.send_rows.numel(), b_rows = b.send_rows.numel();
    const torch::Tensor a_source =
        torch::arange(3 * (a_rows + 2), torch::kFloat32).view({-1, 3}) + 1000.0f * me;
    const torch::Tensor a_pick = torch::arange(a_rows, torch::kInt64) * 2 % (a_rows + 2);
    const torch::Tensor b_source =
        torch::arange(4 * b_rows, torch::kInt64).view({-1, 2, 2}) + 100000 * (me + 1);

    PairExchange exchange(std::shared_ptr<Collectives>(&collectives, [](Collectives*) {}));
    const torch::Tensor a_alone = exchange.dispatch(a_source, a_pick, a);
    const torch::Tensor b_alone = exchange.dispatch(b_source, b);
    TimedSpans spans;
    const ExchangeMeasurement alone = exchange.take_measurement(spans);
    const std::vector<torch::Tensor> together =
        exchange.dispatch_together({{a_source, a_pick, &a, torch::Tensor()},
                                    {b_source, torch::Tensor(), &b, torch::Tensor()}});
    const ExchangeMeasurement fused = exchange.take_measurement(spans);

    // Each part of the fused call is padded to 8 bytes (the int64 message's alignment): at
    // most 7 bytes more per message and other process.
    auto padded = [](int64_t fused_bytes, int64_t alone_bytes) {
      return fused_bytes >= alone_bytes && fused_bytes - alone_bytes <= 7 * 2 * 2;
    };
    return together.size() == 2 && together[0].equal(a_alone) && together[1].equal(b_alone) &&
           alone.calls == 2 && fused.calls == 1 && padded(fused.bytes_sent, alone.bytes_sent) &&
           padded(fused.bytes_received, alone.bytes_received);
  });
  CHECK(codes == std::vector<int>{0, 0, 0});
}
