#include "core/cost/machine_probe.hpp"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>
#include <utility>

#include "core/system/blas_probe.hpp"
#include "core/system/host_info.hpp"

namespace lrmoe {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Best of a few copies of a large buffer, as seconds per copy, and its size in bytes.
std::pair<double, double> measure_large_copy() {
  const int64_t elements = int64_t{1} << 25;  // 128 MiB of float32: well past the last-level cache
  auto source = torch::ones({elements}, torch::kFloat32);
  auto target = torch::empty({elements}, torch::kFloat32);
  target.copy_(source);  // warm-up: page faults, thread pool
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 3; ++i) {
    const auto started = std::chrono::steady_clock::now();
    target.copy_(source);
    best = std::min(best, seconds_since(started));
  }
  return {std::max(best, 1e-9), static_cast<double>(elements) * 4.0};
}

// Seconds to move a few rows of one rank's activations into another's buffer in one process.
double measure_small_move() {
  const int64_t rows = 4096;
  const int64_t hidden = 256;
  auto source = torch::randn({rows, hidden}, torch::kFloat32);
  auto index = torch::tensor({3, 700, 1500, 4000}, torch::kLong);
  auto target = torch::empty({index.size(0), hidden}, torch::kFloat32);
  target.copy_(source.index_select(0, index));  // warm-up
  const int batches = 10;
  const int per_batch = 50;
  double best = std::numeric_limits<double>::infinity();
  for (int b = 0; b < batches; ++b) {
    const auto started = std::chrono::steady_clock::now();
    for (int i = 0; i < per_batch; ++i) target.copy_(source.index_select(0, index));
    best = std::min(best, seconds_since(started) / per_batch);
  }
  return std::max(best, 1e-9);
}

}  // namespace

HardwareProfile probe_this_machine(int64_t ranks) {
  if (ranks < 1) {
    throw std::invalid_argument(fmt::format(
        "probe_this_machine: ranks = {} is out of range; a run has at least 1 rank", ranks));
  }
  torch::NoGradGuard no_grad;
  const BlasReport blas = probe_blas();
  const auto [copy_seconds, copy_bytes] = measure_large_copy();
  const double move_seconds = measure_small_move();

  HardwareProfile profile;
  profile.name = kThisMachineProfile;
  profile.source = "probed on " + host_name();
  profile.peak_flops = blas.matmul_gflops * 1e9;
  profile.gemm_efficiency = {{1, 1.0}};
  // each byte read once and written once
  profile.memory_bandwidth = 2.0 * copy_bytes / copy_seconds;
  profile.element_bytes = 4;
  profile.ranks_per_node = ranks;
  profile.intra_node_bandwidth = copy_bytes / copy_seconds;
  profile.intra_node_latency = move_seconds;
  profile.inter_node_bandwidth = profile.intra_node_bandwidth;
  profile.inter_node_latency = profile.intra_node_latency;
  // On a CPU, host memory is the device's: a transfer between them is a copy within memory.
  profile.host_link_bandwidth = copy_bytes / copy_seconds;
  profile.description = fmt::format(
      "measured on {}: {:.1f} GFLOP/s float32 matmul ({}), {:.1f} GB/s tensor copy, {:.2f} us to "
      "move 4 rows; "
      "all {} logical ranks on this host",
      host_name(), blas.matmul_gflops, blas.library, profile.intra_node_bandwidth / 1e9,
      move_seconds * 1e6, ranks);
  return profile;
}

}  // namespace lrmoe
