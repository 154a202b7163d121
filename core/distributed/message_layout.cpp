#include "core/distributed/message_layout.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <utility>

namespace lrmoe {
namespace {

int64_t round_up(int64_t bytes, int64_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

// Lays out the parts of every process's run, message after message, each padded to `alignment`;
// returns the runs' bytes and fills `offsets` ([processes * messages]).
std::vector<int64_t> lay_out(const std::vector<MessageShape>& messages,
                             const std::vector<int64_t>& row_bytes, int64_t alignment,
                             std::vector<int64_t> MessageShape::*rows,
                             std::vector<int64_t>& offsets) {
  const std::size_t processes = (messages.front().*rows).size();
  std::vector<int64_t> run_bytes(processes, 0);
  int64_t at = 0;
  for (std::size_t q = 0; q < processes; ++q) {
    for (std::size_t m = 0; m < messages.size(); ++m) {
      offsets.push_back(at);
      const int64_t part = round_up((messages[m].*rows)[q] * row_bytes[m], alignment);
      run_bytes[q] += part;
      at += part;
    }
  }
  return run_bytes;
}

}  // namespace

MessageLayout::MessageLayout(std::vector<MessageShape> messages) : messages_(std::move(messages)) {
  TORCH_CHECK(!messages_.empty(), "MessageLayout: no message");
  int64_t alignment = 1;
  for (const MessageShape& m : messages_) {
    const int64_t element = static_cast<int64_t>(c10::elementSize(m.dtype));
    alignment = std::max(alignment, element);
    row_bytes_.push_back(
        std::accumulate(m.row_shape.begin(), m.row_shape.end(), element, std::multiplies<>()));
  }
  send_bytes_ = lay_out(messages_, row_bytes_, alignment, &MessageShape::send_rows, send_offsets_);
  recv_bytes_ = lay_out(messages_, row_bytes_, alignment, &MessageShape::recv_rows, recv_offsets_);
}

torch::Tensor MessageLayout::send_buffer(const torch::Device& device) const {
  const int64_t bytes = std::accumulate(send_bytes_.begin(), send_bytes_.end(), int64_t{0});
  return torch::empty({bytes, 1}, torch::TensorOptions().dtype(torch::kUInt8).device(device));
}

torch::Tensor MessageLayout::send_part(const torch::Tensor& buffer, std::size_t m,
                                       std::size_t q) const {
  return part(buffer, send_offsets_, messages_[m].send_rows, m, q);
}

torch::Tensor MessageLayout::recv_part(const torch::Tensor& buffer, std::size_t m,
                                       std::size_t q) const {
  return part(buffer, recv_offsets_, messages_[m].recv_rows, m, q);
}

void MessageLayout::fill_send_parts(const torch::Tensor& send, std::size_t m,
                                    c10::function_ref<void(torch::Tensor&, int64_t)> fill) const {
  int64_t first = 0;
  for (std::size_t q = 0; q < processes(); ++q) {
    torch::Tensor part = send_part(send, m, q);
    fill(part, first);
    first += part.size(0);
  }
}

torch::Tensor MessageLayout::part(const torch::Tensor& buffer, const std::vector<int64_t>& offsets,
                                  const std::vector<int64_t>& rows, std::size_t m,
                                  std::size_t q) const {
  const MessageShape& message = messages_[m];
  std::vector<int64_t> shape{rows[q]};
  shape.insert(shape.end(), message.row_shape.begin(), message.row_shape.end());
  // A 1-d byte range, viewed as the message's dtype (its start is aligned for it), then shaped.
  return buffer.view({-1})
      .narrow(0, offsets[q * messages_.size() + m], rows[q] * row_bytes_[m])
      .view(message.dtype)
      .view(shape);
}

MessageShape message_shape(const torch::Tensor& rows, std::vector<int64_t> send_rows,
                           std::vector<int64_t> recv_rows) {
  const auto sizes = rows.sizes();
  return {rows.scalar_type(), std::vector<int64_t>(sizes.begin() + 1, sizes.end()),
          std::move(send_rows), std::move(recv_rows)};
}

torch::Tensor unpack_message(const MessageLayout& layout, const torch::Tensor& arrived,
                             std::size_t m, const torch::Tensor& arrival) {
  const MessageShape& message = layout.message(m);
  const int64_t rows =
      std::accumulate(message.recv_rows.begin(), message.recv_rows.end(), int64_t{0});
  std::vector<int64_t> shape{rows};
  shape.insert(shape.end(), message.row_shape.begin(), message.row_shape.end());
  torch::Tensor out =
      torch::empty(shape, torch::TensorOptions().dtype(message.dtype).device(arrived.device()));
  // Where each received row goes in `out`: the inverse of `arrival`.
  const torch::Tensor place =
      arrival.defined()
          ? torch::empty_like(arrival).scatter_(0, arrival, torch::arange(rows, arrival.options()))
          : torch::Tensor();
  int64_t first = 0;
  for (std::size_t q = 0; q < layout.processes(); ++q) {
    const torch::Tensor part = layout.recv_part(arrived, m, q);
    const int64_t count = part.size(0);
    if (place.defined()) {
      out.index_copy_(0, place.narrow(0, first, count), part);
    } else {
      out.narrow(0, first, count).copy_(part);
    }
    first += count;
  }
  return out;
}

}  // namespace lrmoe
