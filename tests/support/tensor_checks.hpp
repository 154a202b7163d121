#pragma once
// Comparing tensors in a test: same shape, and every element within a tolerance.

#include <torch/torch.h>
#include <catch2/catch.hpp>

namespace lrmoe_test {

// Requires equal shapes and max |a - b| <= tolerance, compared in float64 so that bf16 and fp32
// results are measured alike; the difference is printed when it fails.
inline void require_close(const torch::Tensor& a, const torch::Tensor& b, double tolerance) {
  REQUIRE(a.sizes() == b.sizes());
  if (a.numel() == 0) return;
  const double diff = (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
  INFO("max abs difference " << diff);
  REQUIRE(diff <= tolerance);
}

}  // namespace lrmoe_test
