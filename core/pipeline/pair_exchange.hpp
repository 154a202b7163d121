#pragma once
// The one seam where pair rows move between ranks: the all-to-all-v of dispatch (home rank to
// expert instance) and its inverse (combine, and the return of input gradients), over the c10d
// process group of the run (core/distributed/collectives.hpp). Rows between logical ranks of the
// same process never leave it; with one process the move is a permutation. It measures what
// crossed processes and how long the collectives took.

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/device/span_timer.hpp"
#include "core/distributed/collectives.hpp"
#include "core/pipeline/pair_layout.hpp"

namespace lrmoe {

// One all-to-all-v call as this process made it: its sizes, so that a benchmark can make the
// same calls bare, and when this process entered and left it, so that the benchmark can tell
// the time spent waiting for a peer to reach the call from the call's own (lrmoe
// bench-parallel, which compares the entry times of the processes of one host).
struct ExchangeCall {
  std::vector<int64_t> sent_bytes;      // [processes], this one included
  std::vector<int64_t> received_bytes;  // [processes], this one included
  int64_t entered_ns = 0;               // host_clock_ns() on entry
  int64_t left_ns = 0;                  // host_clock_ns() on return
};

// What one process's exchanges moved to and from other processes, and the wall time of their
// all-to-all-v calls (waiting for the slowest peer included).
struct ExchangeMeasurement {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  double seconds = 0;
  // Of `seconds`, those this process spent blocked in the calls: less where it computed while
  // they travelled (Note [Overlapped expert fetch]), else all of them.
  double blocked_seconds = 0;
  int64_t calls = 0;
  std::vector<ExchangeCall> call_log;  // one per call, in call order (this process only)

  ExchangeMeasurement& operator+=(const ExchangeMeasurement& other);
};

// One message of PairExchange::dispatch_together: `source`'s rows sent along `slice`, as
// dispatch(source, slice) sends them, or, with `source_rows` defined ([home rows] int64), as
// dispatch(source, source_rows, slice) does. With `row_scale` defined ([home rows], a factor per
// home row), each row is multiplied by its factor as it is gathered: no scaled copy of the rows
// is made first.
struct DispatchMessage {
  torch::Tensor source;
  torch::Tensor source_rows;
  const ProcessSlice* slice = nullptr;
  torch::Tensor row_scale;
};

class PairExchange;

// An exchange under way (Note [Chunked exchange] in docs/notes.md): wait() blocks until it has
// arrived and returns what the synchronous call returns; later calls return the same. One left
// unwaited-for frees nothing under the transfer.
class PendingRows {
 public:
  std::vector<torch::Tensor> wait();

 private:
  friend class PairExchange;
  PairExchange* exchange_ = nullptr;
  std::size_t call_ = 0;  // its entry in the exchange's call log
  std::optional<Collectives::PendingMessages> pending_;
  // What arrived -> the destination rows of each message (undefined: as it arrived)
  std::function<std::vector<torch::Tensor>(const torch::Tensor&)> finish_;
  torch::Device device_ = torch::kCPU;
  std::vector<torch::Tensor> rows_;
  bool done_ = false;
};

class PairExchange {
 public:
  explicit PairExchange(std::shared_ptr<Collectives> collectives);

  // [home rows, ...] of this process's `slice` of a layout -> its [destination rows, ...].
  torch::Tensor dispatch(const torch::Tensor& home_rows, const ProcessSlice& slice);
  // dispatch(source.index_select(0, source_rows), slice) with one gather instead of two or three:
  // source_rows [home rows] int64 picks each home row from source [n, ...]. With one process the
  // move is a single gather, and none when it would be source itself in order: the result may be
  // `source`, so it must not be modified.
  torch::Tensor dispatch(const torch::Tensor& source, const torch::Tensor& source_rows,
                         const ProcessSlice& slice);
  // Several dispatches in one all-to-all-v call (Note [Fused dispatch] in docs/notes.md): each
  // message's destination rows, as its own dispatch would return them. The messages may differ
  // in width and dtype, and their slices in counts.
  std::vector<torch::Tensor> dispatch_together(const std::vector<DispatchMessage>& messages);

  // The same calls in halves, so that the caller computes while the rows travel (Note [Chunked
  // exchange]): every process starts them in the same order. start_dispatch_together(m).wait()
  // is dispatch_together(m); start_return(rows, slice).wait() is one tensor, `rows` back at
  // their home processes in the order of slice.send_rows, which combine_returned and
  // add_returned take.
  PendingRows start_dispatch_together(const std::vector<DispatchMessage>& messages);
  PendingRows start_return(const torch::Tensor& destination_rows, const ProcessSlice& slice);
  // [sent rows, ...] in send order -> [home rows, ...]; slice's rows only: the inverse of
  // dispatch.
  static torch::Tensor combine_returned(const torch::Tensor& returned, const ProcessSlice& slice);
  // out.index_add_(0, out_rows, combine_returned(returned, slice)) without the copy: out_rows
  // [home rows] int64 names the row of `out` each home row adds into.
  static void add_returned(torch::Tensor& out, const torch::Tensor& out_rows,
                           const torch::Tensor& returned, const ProcessSlice& slice);

  // The measurement since the last call, then starts afresh. Its seconds are left at zero: the
  // calls' timed spans are handed over unread (Note [Device timing]).
  ExchangeMeasurement take_measurement(TimedSpans& spans);

 private:
  friend class PendingRows;
  // Logs a call of `send`'s rows (send_rows[q] rows to process q, recv_rows[q] from it), entered
  // now; returns its index in the call log.
  std::size_t log_call(const torch::Tensor& send, const std::vector<int64_t>& send_rows,
                       const std::vector<int64_t>& recv_rows);
  // Issues `send` [bytes, 1] uint8, logged and timed; `finish` makes the result of what arrived.
  PendingRows start_bytes(const torch::Tensor& send, const std::vector<int64_t>& send_bytes,
                          const std::vector<int64_t>& recv_bytes,
                          std::function<std::vector<torch::Tensor>(const torch::Tensor&)> finish);
  // With one process: the message's rows in destination order, gathered (and scaled) in one
  // pass; `source` itself when that is every row in order, unscaled.
  torch::Tensor gather_here(const DispatchMessage& m);

  std::shared_ptr<Collectives> collectives_;
  ExchangeMeasurement measurement_;
  SpanTimer timer_;  // the exchanges' time (Note [Device timing])
};

}  // namespace lrmoe
