#include "core/pipeline/pair_exchange.hpp"

#include <chrono>
#include <utility>

namespace lrmoe {

ExchangeMeasurement& ExchangeMeasurement::operator+=(const ExchangeMeasurement& other) {
  bytes_sent += other.bytes_sent;
  bytes_received += other.bytes_received;
  seconds += other.seconds;
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

std::vector<torch::Tensor> PairExchange::exchange(
    const std::vector<Collectives::RowMessage>& messages) {
  if (collectives_->single()) return collectives_->exchange_messages(messages);
  const auto me = static_cast<std::size_t>(collectives_->rank());
  ExchangeCall& call = measurement_.call_log.emplace_back();
  call.sent_bytes.assign(static_cast<std::size_t>(collectives_->size()), 0);
  call.received_bytes = call.sent_bytes;
  for (const Collectives::RowMessage& m : messages) {
    // A message without rows sends and receives none: its row size does not matter.
    const int64_t row_bytes = m.rows.size(0) > 0 ? m.rows.nbytes() / m.rows.size(0) : 0;
    for (std::size_t q = 0; q < call.sent_bytes.size(); ++q) {
      call.sent_bytes[q] += m.send_rows[q] * row_bytes;
      call.received_bytes[q] += m.recv_rows[q] * row_bytes;
    }
  }
  for (std::size_t q = 0; q < call.sent_bytes.size(); ++q) {
    if (q == me) continue;
    measurement_.bytes_sent += call.sent_bytes[q];
    measurement_.bytes_received += call.received_bytes[q];
  }
  timer_.start(messages.front().rows.device());
  call.entered_ns = host_clock_ns();
  std::vector<torch::Tensor> received = collectives_->exchange_messages(messages);
  call.left_ns = host_clock_ns();
  timer_.stop();
  ++measurement_.calls;
  return received;
}

torch::Tensor PairExchange::dispatch(const torch::Tensor& home_rows, const ProcessSlice& s) {
  if (collectives_->single()) return home_rows.index_select(0, home_row_of_destination(s));
  return send_gathered(home_rows, s.send_rows, s);
}

torch::Tensor PairExchange::send_gathered(const torch::Tensor& source,
                                          const torch::Tensor& send_order_rows,
                                          const ProcessSlice& s) {
  torch::Tensor received =
      exchange({{source.index_select(0, send_order_rows), s.send_counts, s.recv_counts}}).front();
  return s.arrival.defined() ? received.index_select(0, s.arrival) : received;
}

torch::Tensor PairExchange::return_buffer(const torch::Tensor& destination_rows,
                                          const ProcessSlice& s) {
  const torch::Tensor buffer =
      s.arrival.defined()
          ? torch::empty_like(destination_rows).index_copy_(0, s.arrival, destination_rows)
          : destination_rows;
  return exchange({{buffer, s.recv_counts, s.send_counts}}).front();
}

torch::Tensor PairExchange::dispatch(const torch::Tensor& source, const torch::Tensor& source_rows,
                                     const ProcessSlice& s) {
  if (!collectives_->single())
    return send_gathered(source, source_rows.index_select(0, s.send_rows), s);
  const torch::Tensor rows = source_rows.index_select(0, home_row_of_destination(s));
  return every_row_in_order(rows, source) ? source : source.index_select(0, rows);
}

std::vector<torch::Tensor> PairExchange::dispatch_together(
    const std::vector<DispatchMessage>& messages) {
  std::vector<torch::Tensor> arrived;
  if (collectives_->single()) {
    for (const DispatchMessage& m : messages)
      arrived.push_back(m.source_rows.defined() ? dispatch(m.source, m.source_rows, *m.slice)
                                                : dispatch(m.source, *m.slice));
    return arrived;
  }
  std::vector<Collectives::RowMessage> sent;
  for (const DispatchMessage& m : messages) {
    const ProcessSlice& s = *m.slice;
    const torch::Tensor rows =
        m.source_rows.defined() ? m.source_rows.index_select(0, s.send_rows) : s.send_rows;
    sent.push_back({m.source.index_select(0, rows), s.send_counts, s.recv_counts});
  }
  std::vector<torch::Tensor> received = exchange(sent);
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const torch::Tensor& arrival = messages[i].slice->arrival;
    arrived.push_back(arrival.defined() ? received[i].index_select(0, arrival) : received[i]);
  }
  return arrived;
}

void PairExchange::combine_add(torch::Tensor& out, const torch::Tensor& out_rows,
                               const torch::Tensor& destination_rows, const ProcessSlice& s) {
  if (collectives_->single()) {
    out.index_add_(0, out_rows.index_select(0, home_row_of_destination(s)), destination_rows);
    return;
  }
  out.index_add_(0, out_rows.index_select(0, s.send_rows), return_buffer(destination_rows, s));
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
