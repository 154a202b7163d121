// Span timers and host readbacks (Note [Device timing]): what they sum, that they hand their
// figures over unread, and, tagged [gpu], that what one step queued is read without waiting once
// the next step's work has passed a synchronisation.

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <thread>

#include "core/device/cuda_runtime.hpp"
#include "core/device/host_readback.hpp"
#include "core/device/span_timer.hpp"
#include "support/gpu.hpp"

using namespace lrmoe;

TEST_CASE("a span timer hands over its spans and charges unread, then starts afresh", "[device]") {
  SpanTimer timer;
  timer.start(torch::kCPU);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  timer.stop();
  timer.start(torch::kCPU);
  timer.stop();
  timer.charge(5.0);
  const TimedSpans taken = timer.take();
  bool waited = false;
  const double seconds = taken.read(&waited);
  CHECK(seconds >= 5.02);  // sleep_for waits at least as long as asked
  CHECK(seconds < 60.0);
  CHECK_FALSE(waited);
  CHECK(taken.read() == seconds);  // reading does not consume
  CHECK(timer.take_seconds() == 0.0);
  timer.stop();  // a stop without a start adds nothing
  CHECK(timer.take_seconds() == 0.0);
}

TEST_CASE("timed spans of several timers add up to one figure", "[device]") {
  SpanTimer first, second;
  first.charge(1.5);
  second.charge(0.25);
  TimedSpans sum = first.take();
  sum += second.take();
  CHECK(sum.read() == 1.75);
}

TEST_CASE("a host readback of CPU values is those values, read without waiting", "[device]") {
  const torch::Tensor values = torch::tensor({1.5, -2.0, 3.0}, torch::kFloat64);
  const HostReadback readback(values);
  bool waited = false;
  CHECK(readback.read(&waited).equal(values));
  CHECK_FALSE(waited);
}

TEST_CASE(
    "on a GPU one step's spans and figures are read after the next step's first wait "
    "without waiting",
    "[gpu]") {
  const std::optional<torch::Device> gpu = test::gpu_or_skip();
  if (!gpu) return;
  auto a = torch::randn({4096, 4096}, torch::TensorOptions().device(*gpu));
  SpanTimer timer;
  // Step s: timed work and a figure queued for the host.
  timer.start(*gpu);
  for (int i = 0; i < 8; ++i) a = torch::tanh(a.matmul(a));
  timer.stop();
  const HostReadback figure(a.sum().reshape({1}));
  const TimedSpans spans = timer.take();
  // Step s + 1: a small copy the host waits for (as the pipeline's counts), then queued work
  // still running while step s is read.
  CHECK(a.abs().max().item<float>() >= 0);
  for (int i = 0; i < 8; ++i) a = torch::tanh(a.matmul(a));
  bool waited = false;
  const double seconds = spans.read(&waited);
  const torch::Tensor read = figure.read(&waited);
  CHECK(seconds > 0.0);
  CHECK(read.is_cpu());
  CHECK(std::isfinite(read.item<float>()));
  CHECK_FALSE(waited);
  synchronize(*gpu);
}
