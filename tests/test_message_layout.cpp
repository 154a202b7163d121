// The layout of several row messages in one all-to-all-v's byte buffer
// (core/distributed/message_layout.hpp): runs per process, message after message, each part
// aligned for its dtype, read and written in place.

#include <catch2/catch.hpp>

#include "core/distributed/message_layout.hpp"

using namespace lrmoe;

TEST_CASE("messages of one element size are laid out back to back without padding",
          "[distributed]") {
  // Two processes; float32 rows of 3 and int32 rows of 1.
  const MessageLayout layout(
      {{torch::kFloat32, {3}, {1, 2}, {3, 0}}, {torch::kInt32, {}, {5, 1}, {0, 2}}});
  CHECK(layout.send_bytes() == std::vector<int64_t>{1 * 12 + 5 * 4, 2 * 12 + 1 * 4});
  CHECK(layout.recv_bytes() == std::vector<int64_t>{3 * 12, 2 * 4});
}

TEST_CASE("each part of a mixed-size call starts aligned for its dtype, the runs padded to it",
          "[distributed]") {
  // float32 rows of 3 (12 bytes) beside int64 rows of 2 x 2 (32 bytes): parts padded to 8.
  const MessageLayout layout(
      {{torch::kFloat32, {3}, {1, 3}, {1, 1}}, {torch::kInt64, {2, 2}, {1, 0}, {2, 1}}});
  CHECK(layout.send_bytes() == std::vector<int64_t>{16 + 32, 40 + 0});
  CHECK(layout.recv_bytes() == std::vector<int64_t>{16 + 64, 16 + 32});

  const torch::Tensor send = layout.send_buffer(torch::kCPU);
  REQUIRE(send.numel() == 88);
  send.zero_();
  for (std::size_t q = 0; q < 2; ++q) {
    const torch::Tensor floats = layout.send_part(send, 0, q);
    const torch::Tensor longs = layout.send_part(send, 1, q);
    CHECK(floats.scalar_type() == torch::kFloat32);
    CHECK(longs.sizes() == torch::IntArrayRef{q == 0 ? 1 : 0, 2, 2});
    floats.fill_(1.5f + static_cast<float>(q));
    longs.fill_(7);
  }
  // The bytes as written: process 0's run (1 float row, 4 bytes of padding, 1 long row), then
  // process 1's (3 float rows, 4 bytes of padding).
  const torch::Tensor run0 = send.view({-1}).narrow(0, 0, 48);
  CHECK(run0.narrow(0, 0, 12).view(torch::kFloat32).eq(1.5f).all().item<bool>());
  CHECK(run0.narrow(0, 16, 32).view(torch::kInt64).eq(7).all().item<bool>());
  CHECK(send.view({-1}).narrow(0, 48, 36).view(torch::kFloat32).eq(2.5f).all().item<bool>());
}

TEST_CASE("a message unpacks in receive order, or into its destination order by one copy",
          "[distributed]") {
  const MessageLayout layout(
      {{torch::kInt64, {}, {0, 0}, {2, 3}}, {torch::kFloat32, {2}, {0, 0}, {1, 1}}});
  const int64_t bytes = layout.recv_bytes()[0] + layout.recv_bytes()[1];
  const torch::Tensor arrived = torch::zeros({bytes, 1}, torch::kUInt8);
  layout.recv_part(arrived, 0, 0).copy_(torch::tensor({10, 11}, torch::kInt64));
  layout.recv_part(arrived, 0, 1).copy_(torch::tensor({20, 21, 22}, torch::kInt64));
  layout.recv_part(arrived, 1, 0).fill_(0.5f);
  layout.recv_part(arrived, 1, 1).fill_(-0.5f);

  CHECK(unpack_message(layout, arrived, 0, torch::Tensor())
            .equal(torch::tensor({10, 11, 20, 21, 22}, torch::kInt64)));
  // Destination row d is received row arrival[d].
  const torch::Tensor arrival = torch::tensor({4, 0, 2, 1, 3}, torch::kInt64);
  CHECK(unpack_message(layout, arrived, 0, arrival)
            .equal(torch::tensor({22, 10, 20, 11, 21}, torch::kInt64)));
  const torch::Tensor floats = unpack_message(layout, arrived, 1, torch::Tensor());
  CHECK(floats.equal(torch::tensor({0.5f, 0.5f, -0.5f, -0.5f}).view({2, 2})));
}
