#pragma once
// Where several row messages lie in the one byte buffer of an all-to-all-v that carries them all
// (Note [Fused dispatch] in docs/notes.md). The run of bytes to (from) process q holds every
// message's rows for q, message after message. Each part is padded to a multiple of the largest
// element size among the messages, so that every part starts aligned for its dtype and is read
// and written in place, as a typed view of the buffer; messages of one element size (the usual
// case) need no padding.

#include <c10/util/FunctionRef.h>
#include <torch/torch.h>

#include <cstddef>
#include <vector>

namespace lrmoe {

// One message: its rows' dtype and shape after the first dimension, and how many rows go to and
// come from each process (this one included).
struct MessageShape {
  torch::ScalarType dtype = torch::kFloat32;
  std::vector<int64_t> row_shape;
  std::vector<int64_t> send_rows;  // [processes]
  std::vector<int64_t> recv_rows;  // [processes]
};

class MessageLayout {
 public:
  explicit MessageLayout(std::vector<MessageShape> messages);

  const MessageShape& message(std::size_t m) const { return messages_[m]; }
  std::size_t processes() const { return send_bytes_.size(); }
  // Bytes of the run to (from) each process: the all-to-all-v's counts, padding included.
  const std::vector<int64_t>& send_bytes() const { return send_bytes_; }
  const std::vector<int64_t>& recv_bytes() const { return recv_bytes_; }
  // An uninitialised send buffer, [send bytes, 1] uint8 on `device`.
  torch::Tensor send_buffer(const torch::Device& device) const;
  // Message m's rows to (from) process q: a view of `buffer` (the send, or the received, buffer
  // of this layout), [rows, row_shape...] in the message's dtype.
  torch::Tensor send_part(const torch::Tensor& buffer, std::size_t m, std::size_t q) const;
  torch::Tensor recv_part(const torch::Tensor& buffer, std::size_t m, std::size_t q) const;
  // Writes message m into `send`: fill(part, first) for the part of every process, `first`
  // being the index of its first row among the message's rows in process order.
  void fill_send_parts(const torch::Tensor& send, std::size_t m,
                       c10::function_ref<void(torch::Tensor&, int64_t)> fill) const;

 private:
  torch::Tensor part(const torch::Tensor& buffer, const std::vector<int64_t>& offsets,
                     const std::vector<int64_t>& rows, std::size_t m, std::size_t q) const;

  std::vector<MessageShape> messages_;
  std::vector<int64_t> row_bytes_;  // [messages]
  std::vector<int64_t> send_bytes_, recv_bytes_;
  // [processes * messages]: byte offset of the part of message m for process q at q * M + m.
  std::vector<int64_t> send_offsets_, recv_offsets_;
};

// The shape of a message of `rows` ([n, ...]) with these counts.
MessageShape message_shape(const torch::Tensor& rows, std::vector<int64_t> send_rows,
                           std::vector<int64_t> recv_rows);

// Message m's received rows out of `arrived` (the received buffer of `layout`), one copy: in
// receive order (by source process), or, with `arrival` defined ([received rows] int64, a
// permutation), row d of the result is received row arrival[d].
torch::Tensor unpack_message(const MessageLayout& layout, const torch::Tensor& arrived,
                             std::size_t m, const torch::Tensor& arrival);

}  // namespace lrmoe
