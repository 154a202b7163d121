// Span timers (Note [Device timing]): what they sum, when they are read, and, tagged [gpu],
// CUDA event spans read after the device's synchronisation without waiting.

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "core/device/cuda_runtime.hpp"
#include "core/device/span_timer.hpp"
#include "support/gpu.hpp"

using namespace lrmoe;

TEST_CASE("a span timer sums its spans and charges until read, then starts afresh", "[device]") {
  SpanTimer timer;
  timer.start(torch::kCPU);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  timer.stop();
  timer.start(torch::kCPU);
  timer.stop();
  timer.charge(5.0);
  const double seconds = timer.take_seconds();
  CHECK(seconds >= 5.02);  // sleep_for waits at least as long as asked
  CHECK(seconds < 60.0);
  CHECK(timer.take_seconds() == 0.0);
  CHECK(timer.stalls() == 0);
  timer.stop();  // a stop without a start adds nothing
  CHECK(timer.take_seconds() == 0.0);
}

TEST_CASE("on a GPU a span is the device's time and is read without waiting after a sync",
          "[gpu]") {
  const std::optional<torch::Device> gpu = test::gpu_or_skip();
  if (!gpu) return;
  auto a = torch::randn({4096, 4096}, torch::TensorOptions().device(*gpu));
  SpanTimer timer;
  timer.start(*gpu);
  for (int i = 0; i < 8; ++i) a = torch::tanh(a.matmul(a));
  timer.stop();
  synchronize(*gpu);
  const double seconds = timer.take_seconds();
  CHECK(seconds > 0.0);
  CHECK(timer.stalls() == 0);
}
