#include "core/pipeline/pair_exchange.hpp"

#include <chrono>
#include <functional>
#include <numeric>
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

int64_t host_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

PairExchange::PairExchange(std::shared_ptr<Collectives> collectives)
    : collectives_(std::move(collectives)) {}

torch::Tensor PairExchange::exchange(const torch::Tensor& rows, const std::vector<int64_t>& send,
                                     const std::vector<int64_t>& recv) {
  if (collectives_->single()) return rows;
  const int64_t row_bytes =
      rows.size(0) > 0 ? rows.nbytes() / rows.size(0) : rows.numel() * rows.element_size();
  const auto me = static_cast<std::size_t>(collectives_->rank());
  ExchangeCall& call = measurement_.call_log.emplace_back();
  for (std::size_t q = 0; q < send.size(); ++q) {
    call.sent_bytes.push_back(send[q] * row_bytes);
    call.received_bytes.push_back(recv[q] * row_bytes);
    if (q == me) continue;
    measurement_.bytes_sent += send[q] * row_bytes;
    measurement_.bytes_received += recv[q] * row_bytes;
  }
  timer_.start(rows.device());
  call.entered_ns = host_clock_ns();
  torch::Tensor received = collectives_->exchange_rows(rows, send, recv);
  call.left_ns = host_clock_ns();
  timer_.stop();
  ++measurement_.calls;
  return received;
}

torch::Tensor PairExchange::dispatch(const torch::Tensor& home_rows, const ProcessSlice& s) {
  return send_gathered(home_rows, s.send_rows, s);
}

torch::Tensor PairExchange::send_gathered(const torch::Tensor& source,
                                          const torch::Tensor& send_order_rows,
                                          const ProcessSlice& s) {
  torch::Tensor received =
      exchange(source.index_select(0, send_order_rows), s.send_counts, s.recv_counts);
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

namespace {

// The home row of each destination row, where both are in this process: send_rows in arrival
// order.
torch::Tensor home_row_of_destination(const ProcessSlice& s) {
  return s.arrival.defined() ? s.send_rows.index_select(0, s.arrival) : s.send_rows;
}

// Elements in one row of `rows` [n, ...], whatever n (0 included).
int64_t row_elements(const torch::Tensor& rows) {
  const auto sizes = rows.sizes();
  return std::accumulate(sizes.begin() + 1, sizes.end(), int64_t{1}, std::multiplies<>());
}

// Whether gathering `rows` of `source` gives `source` itself.
bool every_row_in_order(const torch::Tensor& rows, const torch::Tensor& source) {
  return rows.numel() == source.size(0) && rows.equal(torch::arange(rows.numel(), rows.options()));
}

}  // namespace

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
  const auto processes = static_cast<std::size_t>(collectives_->size());
  // Each message's rows in its send order, as bytes: [rows, row bytes] uint8.
  std::vector<torch::Tensor> sent;
  std::vector<int64_t> row_bytes, send_bytes(processes, 0), recv_bytes(processes, 0);
  for (const DispatchMessage& m : messages) {
    const ProcessSlice& s = *m.slice;
    const torch::Tensor rows =
        m.source_rows.defined() ? m.source_rows.index_select(0, s.send_rows) : s.send_rows;
    const torch::Tensor picked = m.source.index_select(0, rows);
    sent.push_back(picked.reshape({picked.size(0), row_elements(m.source)}).view(torch::kUInt8));
    row_bytes.push_back(sent.back().size(1));
    for (std::size_t q = 0; q < processes; ++q) {
      send_bytes[q] += s.send_counts[q] * row_bytes.back();
      recv_bytes[q] += s.recv_counts[q] * row_bytes.back();
    }
  }
  // What goes to process q is one run of bytes: every message's rows for q, message by message.
  std::vector<torch::Tensor> runs;
  std::vector<int64_t> first_row(messages.size(), 0);
  for (std::size_t q = 0; q < processes; ++q) {
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const int64_t count = messages[i].slice->send_counts[q];
      runs.push_back(sent[i].narrow(0, first_row[i], count).reshape({-1}));
      first_row[i] += count;
    }
  }
  const torch::Tensor received = exchange(torch::cat(runs), send_bytes, recv_bytes);
  // And back into messages: the runs from process q, in process order, are each message's rows
  // in its receive order.
  std::vector<std::vector<torch::Tensor>> parts(messages.size());
  int64_t at = 0;
  for (std::size_t q = 0; q < processes; ++q) {
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const int64_t bytes = messages[i].slice->recv_counts[q] * row_bytes[i];
      parts[i].push_back(received.narrow(0, at, bytes));
      at += bytes;
    }
  }
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const DispatchMessage& m = messages[i];
    std::vector<int64_t> shape = m.source.sizes().vec();
    shape[0] = 0;
    for (const int64_t count : m.slice->recv_counts) shape[0] += count;
    // A fresh tensor from cat: its bytes are aligned for the message's dtype.
    const torch::Tensor rows = torch::cat(parts[i])
                                   .view({shape[0], row_bytes[i]})
                                   .view(m.source.scalar_type())
                                   .view(shape);
    arrived.push_back(m.slice->arrival.defined() ? rows.index_select(0, m.slice->arrival) : rows);
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
  const torch::Tensor returned = return_buffer(destination_rows, s);
  return torch::empty_like(returned).index_copy_(0, s.send_rows, returned);
}

ExchangeMeasurement PairExchange::take_measurement(TimedSpans& spans) {
  spans = timer_.take();
  return std::exchange(measurement_, ExchangeMeasurement{});
}

}  // namespace lrmoe
