#include "core/pipeline/pair_exchange.hpp"

#include <chrono>
#include <functional>
#include <numeric>
#include <utility>

#include "core/distributed/message_layout.hpp"
#include "core/pipeline/pair_rows.hpp"
#include "core/pipeline/stable_order.hpp"

namespace lrmoe {

ExchangeMeasurement& ExchangeMeasurement::operator+=(const ExchangeMeasurement& other) {
  bytes_sent += other.bytes_sent;
  bytes_received += other.bytes_received;
  seconds += other.seconds;
  blocked_seconds += other.blocked_seconds;
  calls += other.calls;
  call_log.insert(call_log.end(), other.call_log.begin(), other.call_log.end());
  return *this;
}

namespace {

// The home row of each destination row, where both are in this process: send_rows in arrival
// order.
torch::Tensor home_row_of_destination(const ProcessSlice& s) {
  return s.arrival.defined() ? s.send_rows.index_select(0, s.arrival) : s.send_rows;
}

// A message's rows of its source, and their factors, taken in `order` ([rows] int64 of home
// rows): the composition of the message's own pick with the exchange's order, so that a row is
// gathered once.
struct OrderedRows {
  torch::Tensor rows;
  torch::Tensor scale;  // undefined when the message has none
};
OrderedRows in_order(const DispatchMessage& m, const torch::Tensor& order) {
  return {m.source_rows.defined() ? m.source_rows.index_select(0, order) : order,
          m.row_scale.defined() ? m.row_scale.index_select(0, order) : torch::Tensor()};
}

// Bytes of one row of `rows` [n, ...].
int64_t bytes_per_row(const torch::Tensor& rows) {
  const auto sizes = rows.sizes();
  return std::accumulate(sizes.begin() + 1, sizes.end(), static_cast<int64_t>(rows.element_size()),
                         std::multiplies<>());
}

// Rows as [bytes, 1] uint8, and back to rows shaped as `like` (all but the count) from bytes.
torch::Tensor as_bytes(const torch::Tensor& rows) {
  return rows.contiguous().view({-1}).view(torch::kUInt8).view({-1, 1});
}
torch::Tensor rows_from_bytes(const torch::Tensor& bytes, const torch::Tensor& like) {
  auto shape = like.sizes().vec();
  shape[0] = -1;
  return bytes.view({-1}).view(like.scalar_type()).view(shape);
}

// Whether gathering `rows` of `source` gives `source` itself.
bool every_row_in_order(const torch::Tensor& rows, const torch::Tensor& source) {
  return rows.numel() == source.size(0) && rows.equal(identity_order(rows.numel(), rows.options()));
}

}  // namespace

PairExchange::PairExchange(std::shared_ptr<Collectives> collectives)
    : collectives_(std::move(collectives)) {}

std::size_t PairExchange::log_call(const torch::Tensor& send, const std::vector<int64_t>& send_rows,
                                   const std::vector<int64_t>& recv_rows) {
  const auto me = static_cast<std::size_t>(collectives_->rank());
  const int64_t row_bytes = bytes_per_row(send);
  ExchangeCall& call = measurement_.call_log.emplace_back();
  for (std::size_t q = 0; q < send_rows.size(); ++q) {
    call.sent_bytes.push_back(send_rows[q] * row_bytes);
    call.received_bytes.push_back(recv_rows[q] * row_bytes);
    if (q == me) continue;
    measurement_.bytes_sent += call.sent_bytes.back();
    measurement_.bytes_received += call.received_bytes.back();
  }
  call.entered_ns = host_clock_ns();
  ++measurement_.calls;
  return measurement_.call_log.size() - 1;
}

PendingRows PairExchange::start_bytes(
    const torch::Tensor& send, const std::vector<int64_t>& send_bytes,
    const std::vector<int64_t>& recv_bytes,
    std::function<std::vector<torch::Tensor>(const torch::Tensor&)> finish) {
  PendingRows pending;
  pending.exchange_ = this;
  pending.device_ = send.device();
  // The time spent issuing it counts as blocked, as does the wait (Note [Chunked exchange]).
  timer_.start(send.device());
  pending.call_ = log_call(send, send_bytes, recv_bytes);
  pending.pending_.emplace(collectives_->start_exchange_bytes(send, send_bytes, recv_bytes));
  timer_.stop();
  pending.finish_ = std::move(finish);
  return pending;
}

std::vector<torch::Tensor> PendingRows::wait() {
  if (done_) return rows_;
  exchange_->timer_.start(device_);
  const torch::Tensor arrived = pending_->wait().front();
  exchange_->measurement_.call_log[call_].left_ns = host_clock_ns();
  exchange_->timer_.stop();
  rows_ = finish_(arrived);
  pending_.reset();
  done_ = true;
  return rows_;
}

torch::Tensor PairExchange::dispatch(const torch::Tensor& home_rows, const ProcessSlice& s) {
  return dispatch_together({{home_rows, torch::Tensor(), &s, torch::Tensor()}}).front();
}

torch::Tensor PairExchange::gather_here(const DispatchMessage& m) {
  const OrderedRows picked = in_order(m, home_row_of_destination(*m.slice));
  if (m.source_rows.defined() && !picked.scale.defined() &&
      every_row_in_order(picked.rows, m.source))
    return m.source;
  return gather_rows(m.source, picked.rows, picked.scale);
}

torch::Tensor PairExchange::dispatch(const torch::Tensor& source, const torch::Tensor& source_rows,
                                     const ProcessSlice& s) {
  return dispatch_together({{source, source_rows, &s, torch::Tensor()}}).front();
}

std::vector<torch::Tensor> PairExchange::dispatch_together(
    const std::vector<DispatchMessage>& messages) {
  return start_dispatch_together(messages).wait();
}

PendingRows PairExchange::start_dispatch_together(const std::vector<DispatchMessage>& messages) {
  PendingRows pending;
  if (collectives_->single()) {
    for (const DispatchMessage& m : messages) pending.rows_.push_back(gather_here(m));
    pending.done_ = true;
    return pending;
  }
  // Each message gathered straight into its parts of the call's buffer, and copied once out of
  // it into its destination order: the call itself moves only bytes.
  std::vector<MessageShape> shapes;
  std::vector<torch::Tensor> arrivals;
  for (const DispatchMessage& m : messages) {
    shapes.push_back(message_shape(m.source, m.slice->send_counts, m.slice->recv_counts));
    arrivals.push_back(m.slice->arrival);
  }
  auto layout = std::make_shared<const MessageLayout>(std::move(shapes));
  const torch::Tensor send = layout->send_buffer(messages.front().source.device());
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const DispatchMessage& m = messages[i];
    const OrderedRows picked = in_order(m, m.slice->send_rows);
    layout->fill_send_parts(send, i, [&](torch::Tensor& part, int64_t first) {
      const int64_t count = part.size(0);
      gather_rows_into(
          part, m.source, picked.rows.narrow(0, first, count),
          picked.scale.defined() ? picked.scale.narrow(0, first, count) : picked.scale);
    });
  }
  return start_bytes(send, layout->send_bytes(), layout->recv_bytes(),
                     [layout, arrivals](const torch::Tensor& received) {
                       std::vector<torch::Tensor> arrived;
                       for (std::size_t i = 0; i < arrivals.size(); ++i)
                         arrived.push_back(unpack_message(*layout, received, i, arrivals[i]));
                       return arrived;
                     });
}

PendingRows PairExchange::start_return(const torch::Tensor& destination_rows,
                                       const ProcessSlice& s) {
  PendingRows pending;
  if (collectives_->single()) {  // arrival and send order are destination order
    pending.rows_ = {destination_rows};
    pending.done_ = true;
    return pending;
  }
  const torch::Tensor buffer =
      s.arrival.defined()
          ? torch::empty_like(destination_rows).index_copy_(0, s.arrival, destination_rows)
          : destination_rows;
  const int64_t row_bytes = bytes_per_row(destination_rows);
  std::vector<int64_t> send_bytes, recv_bytes;
  for (std::size_t q = 0; q < s.send_counts.size(); ++q) {
    send_bytes.push_back(s.recv_counts[q] * row_bytes);
    recv_bytes.push_back(s.send_counts[q] * row_bytes);
  }
  return start_bytes(as_bytes(buffer), send_bytes, recv_bytes,
                     [like = destination_rows.narrow(0, 0, 0)](const torch::Tensor& received) {
                       return std::vector<torch::Tensor>{rows_from_bytes(received, like)};
                     });
}

torch::Tensor PairExchange::combine_returned(const torch::Tensor& returned, const ProcessSlice& s) {
  return torch::empty_like(returned).index_copy_(0, s.send_rows, returned);
}

void PairExchange::add_returned(torch::Tensor& out, const torch::Tensor& out_rows,
                                const torch::Tensor& returned, const ProcessSlice& s) {
  scatter_add_rows(out, out_rows.index_select(0, s.send_rows), returned, torch::Tensor());
}

ExchangeMeasurement PairExchange::take_measurement(TimedSpans& spans) {
  spans = timer_.take();
  return std::exchange(measurement_, ExchangeMeasurement{});
}

}  // namespace lrmoe
