// The fused SwiGLU activation (core/model/swiglu_activation.hpp) against autograd through
// LibTorch's own silu, forward and backward, in fp32 and bf16, with values where the sigmoid
// saturates and rows spread over the threads.

#include <catch2/catch.hpp>

#include "core/model/swiglu_activation.hpp"

using namespace lrmoe;

namespace {

double max_difference(const torch::Tensor& a, const torch::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

// [rows, 2*ffn] pre-activations with saturating values (+-60, where exp(-a) under- or overflows
// in fp32) in the first row beside ordinary ones.
torch::Tensor pre_activations(int64_t rows, int64_t ffn) {
  torch::manual_seed(11);
  auto pre = torch::randn({rows, 2 * ffn}) * 3;
  pre[0][0] = 60;
  pre[0][1] = -60;
  pre[0][2] = 0;
  return pre;
}

void check_against_autograd(torch::ScalarType dtype, double tolerance) {
  const int64_t rows = 300, ffn = 40;  // several parallel tasks of rows
  const torch::Tensor pre = pre_activations(rows, ffn);
  const torch::Tensor grad_hidden = torch::randn({rows, ffn});

  auto reference_pre = pre.clone().requires_grad_();
  const torch::Tensor reference_hidden =
      torch::silu(reference_pre.narrow(1, 0, ffn)) * reference_pre.narrow(1, ffn, ffn);
  reference_hidden.backward(grad_hidden);

  const SwiGLUActivation forward = swiglu_activation(pre.to(dtype), /*row_norm=*/true);
  REQUIRE(forward.hidden.scalar_type() == dtype);
  CHECK(max_difference(forward.hidden, reference_hidden) <= tolerance);
  // The norm is that of the hidden rows as stored.
  CHECK(max_difference(forward.row_norm, forward.hidden.to(torch::kFloat64).norm(2, 1)) <=
        tolerance);
  CHECK_FALSE(swiglu_activation(pre.to(dtype), /*row_norm=*/false).row_norm.defined());

  const SwiGLUActivationGrad backward =
      swiglu_activation_backward(grad_hidden.to(dtype), pre.to(dtype), /*hidden=*/true);
  REQUIRE(backward.grad_pre.scalar_type() == dtype);
  CHECK(max_difference(backward.grad_pre, reference_pre.grad()) <= tolerance);
  CHECK(max_difference(backward.hidden, forward.hidden) == 0.0);
  CHECK(torch::isfinite(backward.grad_pre).all().item<bool>());
  CHECK_FALSE(swiglu_activation_backward(grad_hidden.to(dtype), pre.to(dtype), /*hidden=*/false)
                  .hidden.defined());
}

}  // namespace

TEST_CASE("the fused SwiGLU activation matches autograd through silu in fp32 and bf16", "[gemm]") {
  check_against_autograd(torch::kFloat32, 1e-4);
  // bf16 stores 8 bits of mantissa: values up to ~60 round by up to 0.25.
  check_against_autograd(torch::kBFloat16, 0.5);
}

TEST_CASE("the fused SwiGLU activation reads strided pre-activations", "[gemm]") {
  const torch::Tensor wide = pre_activations(16, 24);
  const torch::Tensor strided = wide.t().contiguous().t();  // same values, column-major
  REQUIRE_FALSE(strided.is_contiguous());
  CHECK(max_difference(swiglu_activation(strided, false).hidden,
                       swiglu_activation(wide, false).hidden) == 0.0);
}
