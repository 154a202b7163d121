#include "core/pipeline/pair_exchange.hpp"

#include <chrono>
#include <functional>
#include <numeric>
#include <utility>

#include "core/distributed/message_layout.hpp"
#include "core/pipeline/pair_rows.hpp"

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

// Whether gathering `rows` of `source` gives `source` itself.
bool every_row_in_order(const torch::Tensor& rows, const torch::Tensor& source) {
  return rows.numel() == source.size(0) && rows.equal(torch::arange(rows.numel(), rows.options()));
}

}  // namespace

int64_t host_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

PairExchange::PairExchange(std::shared_ptr<Collectives> collectives)
    : collectives_(std::move(collectives)) {}

torch::Tensor PairExchange::exchange(const torch::Tensor& send,
                                     const std::vector<int64_t>& send_rows,
                                     const std::vector<int64_t>& recv_rows) {
  const auto me = static_cast<std::size_t>(collectives_->rank());
  const auto sizes = send.sizes();
  const int64_t row_bytes =
      std::accumulate(sizes.begin() + 1, sizes.end(), static_cast<int64_t>(send.element_size()),
                      std::multiplies<>());
  ExchangeCall& call = measurement_.call_log.emplace_back();
  for (std::size_t q = 0; q < send_rows.size(); ++q) {
    call.sent_bytes.push_back(send_rows[q] * row_bytes);
    call.received_bytes.push_back(recv_rows[q] * row_bytes);
    if (q == me) continue;
    measurement_.bytes_sent += call.sent_bytes.back();
    measurement_.bytes_received += call.received_bytes.back();
  }
  timer_.start(send.device());
  call.entered_ns = host_clock_ns();
  torch::Tensor received = collectives_->exchange_rows(send, send_rows, recv_rows);
  call.left_ns = host_clock_ns();
  timer_.stop();
  ++measurement_.calls;
  return received;
}

torch::Tensor PairExchange::dispatch(const torch::Tensor& home_rows, const ProcessSlice& s) {
  if (collectives_->single()) return gather_here({home_rows, torch::Tensor(), &s, torch::Tensor()});
  return send_gathered(home_rows, s.send_rows, s);
}

torch::Tensor PairExchange::gather_here(const DispatchMessage& m) {
  const OrderedRows picked = in_order(m, home_row_of_destination(*m.slice));
  if (m.source_rows.defined() && !picked.scale.defined() &&
      every_row_in_order(picked.rows, m.source))
    return m.source;
  return gather_rows(m.source, picked.rows, picked.scale);
}

torch::Tensor PairExchange::send_gathered(const torch::Tensor& source,
                                          const torch::Tensor& send_order_rows,
                                          const ProcessSlice& s) {
  torch::Tensor received =
      exchange(gather_rows(source, send_order_rows, torch::Tensor()), s.send_counts, s.recv_counts);
  return s.arrival.defined() ? received.index_select(0, s.arrival) : received;
}

torch::Tensor PairExchange::return_buffer(const torch::Tensor& destination_rows,
                                          const ProcessSlice& s) {
  const torch::Tensor buffer =
      s.arrival.defined()
          ? torch::empty_like(destination_rows).index_copy_(0, s.arrival, destination_rows)
          : destination_rows;
  return exchange(buffer, s.recv_counts, s.send_counts);
}

torch::Tensor PairExchange::dispatch(const torch::Tensor& source, const torch::Tensor& source_rows,
                                     const ProcessSlice& s) {
  const DispatchMessage m{source, source_rows, &s, torch::Tensor()};
  if (!collectives_->single()) return send_gathered(source, in_order(m, s.send_rows).rows, s);
  return gather_here(m);
}

std::vector<torch::Tensor> PairExchange::dispatch_together(
    const std::vector<DispatchMessage>& messages) {
  std::vector<torch::Tensor> arrived;
  if (collectives_->single()) {
    for (const DispatchMessage& m : messages) arrived.push_back(gather_here(m));
    return arrived;
  }
  // Each message gathered straight into its parts of the call's buffer, and copied once out of
  // it into its destination order: the call itself moves only bytes.
  std::vector<MessageShape> shapes;
  for (const DispatchMessage& m : messages)
    shapes.push_back(message_shape(m.source, m.slice->send_counts, m.slice->recv_counts));
  const MessageLayout layout(std::move(shapes));
  const torch::Tensor send = layout.send_buffer(messages.front().source.device());
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const DispatchMessage& m = messages[i];
    const OrderedRows picked = in_order(m, m.slice->send_rows);
    layout.fill_send_parts(send, i, [&](torch::Tensor& part, int64_t first) {
      const int64_t count = part.size(0);
      gather_rows_into(
          part, m.source, picked.rows.narrow(0, first, count),
          picked.scale.defined() ? picked.scale.narrow(0, first, count) : picked.scale);
    });
  }
  const torch::Tensor received = exchange(send, layout.send_bytes(), layout.recv_bytes());
  for (std::size_t i = 0; i < messages.size(); ++i)
    arrived.push_back(unpack_message(layout, received, i, messages[i].slice->arrival));
  return arrived;
}

void PairExchange::combine_add(torch::Tensor& out, const torch::Tensor& out_rows,
                               const torch::Tensor& destination_rows, const ProcessSlice& s) {
  if (collectives_->single()) {
    scatter_add_rows(out, out_rows.index_select(0, home_row_of_destination(s)), destination_rows,
                     torch::Tensor());
    return;
  }
  scatter_add_rows(out, out_rows.index_select(0, s.send_rows), return_buffer(destination_rows, s),
                   torch::Tensor());
}

torch::Tensor PairExchange::combine(const torch::Tensor& destination_rows, const ProcessSlice& s) {
  if (collectives_->single()) {  // one copy: the arrival and send orders composed
    return torch::empty_like(destination_rows)
        .index_copy_(0, home_row_of_destination(s), destination_rows);
  }
  const torch::Tensor returned = return_buffer(destination_rows, s);
  return torch::empty_like(returned).index_copy_(0, s.send_rows, returned);
}

ExchangeMeasurement PairExchange::take_measurement(TimedSpans& spans) {
  spans = timer_.take();
  return std::exchange(measurement_, ExchangeMeasurement{});
}

}  // namespace lrmoe
