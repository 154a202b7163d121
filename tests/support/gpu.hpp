#pragma once
// Tests tagged [gpu] run on a visible GPU and are reported as skipped elsewhere: CTest's
// SKIP_REGULAR_EXPRESSION (tests/CMakeLists.txt) matches the message gpu_or_skip() prints.

#include <torch/cuda.h>
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <iostream>
#include <optional>

namespace lrmoe::test {

// cuda:0 when a GPU is visible; otherwise prints the skip message and returns none.
inline std::optional<torch::Device> gpu_or_skip() {
  if (torch::cuda::device_count() > 0) return torch::Device(torch::kCUDA, 0);
  std::cout << "LRMOE-GPU-TEST-SKIPPED: no GPU visible to this build (CUDA LibTorch and a GPU "
               "are needed)\n";
  return std::nullopt;
}

}  // namespace lrmoe::test
