// The grouped GEMM kernels (Note [Grouped GEMM kernels]): each against a naive per-expert
// reference, forward and every gradient, on the CPU and, tagged [gpu], on a GPU in bf16; and the
// choice of kernel at start.

#include <catch2/catch.hpp>

#include "core/config/model_presets.hpp"
#include "core/model/grouped_gemm.hpp"
#include "core/model/grouped_gemm_choice.hpp"
#include "core/model/grouped_swiglu.hpp"
#include "core/model/swiglu_activation.hpp"
#include "core/system/libtorch_compat.hpp"
#include "support/gpu.hpp"
#include "support/tensor_checks.hpp"

using namespace lrmoe;
using lrmoe_test::require_close;

namespace {

// Installs a kernel for one test and restores the process's kernel after it.
class KernelInUse {
 public:
  explicit KernelInUse(GroupedGemmKernel kernel) : previous_(grouped_gemm_kernel()) {
    set_grouped_gemm_kernel(kernel);
  }
  ~KernelInUse() { set_grouped_gemm_kernel(previous_); }
  KernelInUse(const KernelInUse&) = delete;
  KernelInUse& operator=(const KernelInUse&) = delete;

 private:
  GroupedGemmKernel previous_;
};

// Rows per expert with an empty expert first, one in the middle, and uneven sizes elsewhere.
const std::vector<int64_t> kOffsets{0, 0, 3, 10, 10, 11, 19};

// The SwiGLU experts, one plain autograd expression per expert slice.
torch::Tensor naive_experts(const torch::Tensor& x, const torch::Tensor& w_gate_up,
                            const torch::Tensor& w_down) {
  const int64_t ffn = w_down.size(2);
  std::vector<torch::Tensor> slices;
  for (std::size_t e = 0; e + 1 < kOffsets.size(); ++e) {
    auto rows = x.narrow(0, kOffsets[e], kOffsets[e + 1] - kOffsets[e]);
    auto pre = rows.matmul(w_gate_up[static_cast<int64_t>(e)].t());
    auto hidden = torch::silu(pre.narrow(1, 0, ffn)) * pre.narrow(1, ffn, ffn);
    slices.push_back(hidden.matmul(w_down[static_cast<int64_t>(e)].t()));
  }
  return torch::cat(slices);
}

// Forward and every gradient of the grouped SwiGLU experts under `kernel` against autograd
// through the naive experts, computed in fp32 from the same values.
void check_swiglu_experts(GroupedGemmKernel kernel, const torch::Device& device,
                          torch::ScalarType dtype, double tolerance) {
  KernelInUse in_use(kernel);
  torch::manual_seed(7);
  const int64_t experts = static_cast<int64_t>(kOffsets.size()) - 1, rows = kOffsets.back();
  const int64_t hidden = 16, ffn = 24;
  auto options = torch::TensorOptions().device(device);
  auto x = torch::randn({rows, hidden}, options);
  auto w_gate_up = torch::randn({experts, 2 * ffn, hidden}, options) * 0.3;
  auto w_down = torch::randn({experts, hidden, ffn}, options) * 0.3;
  auto grad_out = torch::randn({rows, hidden}, options);

  auto xr = x.clone().requires_grad_(), gr = w_gate_up.clone().requires_grad_(),
       dr = w_down.clone().requires_grad_();
  const torch::Tensor reference = naive_experts(xr, gr, dr);
  reference.backward(grad_out);

  const auto x_c = x.to(dtype), gate_up_c = w_gate_up.to(dtype), down_c = w_down.to(dtype);
  // The output rows are written beside their norms' column, as the forward writes them, and a
  // column after it stays as it was.
  const torch::Tensor pre = torch::empty({rows, 2 * ffn}, options.dtype(dtype));
  const torch::Tensor with_columns = torch::full({rows, hidden + 2}, 7.0, options.dtype(dtype));
  const torch::Tensor out = with_columns.narrow(1, 0, hidden);
  grouped_swiglu_forward_into(pre, out, with_columns.select(1, hidden), x_c, kOffsets, gate_up_c,
                              down_c);
  require_close(out, reference, tolerance);
  require_close(pre, grouped_pre_activations(x_c, kOffsets, gate_up_c), tolerance);
  require_close(with_columns.select(1, hidden), swiglu_activation(pre, /*row_norm=*/true).row_norm,
                tolerance);
  CHECK(with_columns.select(1, hidden + 1).eq(7.0).all().item<bool>());

  SwiGLUWeightGrads weight_grads{WeightGradSum(gate_up_c), WeightGradSum(down_c)};
  const torch::Tensor input_grad =
      grouped_swiglu_backward(grad_out.to(dtype), x_c, pre, kOffsets, gate_up_c, down_c, {},
                              &weight_grads, /*input_grads=*/true);
  const torch::Tensor w_gate_up_grad = weight_grads.w_gate_up.finish().first();
  const torch::Tensor w_down_grad = weight_grads.w_down.finish().first();
  require_close(input_grad, xr.grad(), tolerance);
  require_close(w_gate_up_grad, gr.grad(), tolerance);
  require_close(w_down_grad, dr.grad(), tolerance);
  // An expert without rows gets a zero gradient, not stale memory.
  REQUIRE(w_down_grad[0].abs().max().item<double>() == 0.0);
  REQUIRE(w_gate_up_grad[3].abs().max().item<double>() == 0.0);
}

}  // namespace

TEST_CASE("every grouped GEMM kernel computes the per-expert products on the CPU", "[gemm]") {
  for (GroupedGemmKernel kernel : available_grouped_gemm_kernels()) {
    INFO("kernel " << kernel_name(kernel));
    KernelInUse in_use(kernel);
    torch::manual_seed(3);
    const int64_t experts = static_cast<int64_t>(kOffsets.size()) - 1;
    auto x = torch::randn({kOffsets.back(), 8});
    auto w = torch::randn({experts, 12, 8});  // [experts, n, k]
    auto w_plain = torch::randn({experts, 8, 12});
    auto grad_out = torch::randn({kOffsets.back(), 12});
    const torch::Tensor transposed = grouped_mm(x, kOffsets, w, /*transpose_weights=*/true);
    const torch::Tensor plain = grouped_mm(x, kOffsets, w_plain, /*transpose_weights=*/false);
    const torch::Tensor weight_grad = grouped_weight_grad(grad_out, x, kOffsets, w);
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t first = kOffsets[e], count = kOffsets[e + 1] - first;
      auto rows = x.narrow(0, first, count);
      require_close(transposed.narrow(0, first, count), rows.matmul(w[e].t()), 1e-5);
      require_close(plain.narrow(0, first, count), rows.matmul(w_plain[e]), 1e-5);
      require_close(weight_grad[e], grad_out.narrow(0, first, count).t().matmul(rows), 1e-5);
    }
  }
}

TEST_CASE("replica groups read their expert's matrix and sum their weight gradients into it",
          "[gemm]") {
  for (GroupedGemmKernel kernel : available_grouped_gemm_kernels()) {
    INFO("kernel " << kernel_name(kernel));
    KernelInUse in_use(kernel);
    torch::manual_seed(4);
    // Groups 0 and 2 are instances of matrix 2 within one call; matrix 0 gets a second call;
    // matrix 3 no group at all.
    const std::vector<int64_t> offsets{0, 3, 5, 9, 10};
    const WeightIndex index{2, 0, 2, 1};
    auto w = torch::randn({4, 12, 8});  // [matrices, n, k]
    auto x = torch::randn({10, 8});
    auto grad_out = torch::randn({10, 12});
    const torch::Tensor out = grouped_mm(x, offsets, w, /*transpose_weights=*/true, index);
    auto expected_grad = torch::zeros_like(w);
    for (std::size_t g = 0; g < index.size(); ++g) {
      const int64_t first = offsets[g], count = offsets[g + 1] - first;
      require_close(out.narrow(0, first, count), x.narrow(0, first, count).matmul(w[index[g]].t()),
                    1e-5);
      expected_grad[index[g]] +=
          grad_out.narrow(0, first, count).t().matmul(x.narrow(0, first, count));
    }
    auto extra_x = torch::randn({4, 8});
    auto extra_grad = torch::randn({4, 12});
    expected_grad[0] += extra_grad.t().matmul(extra_x);

    WeightGradSum sum(w);
    sum.add(grad_out, x, offsets, index);
    sum.add(extra_grad, extra_x, {0, 4}, {0});
    const torch::Tensor grad = sum.finish().first();
    require_close(grad, expected_grad, 1e-4);
    REQUIRE(grad[3].abs().max().item<double>() == 0.0);
  }
}

TEST_CASE("every grouped GEMM kernel gives the SwiGLU experts' forward and every gradient",
          "[gemm]") {
  for (GroupedGemmKernel kernel : available_grouped_gemm_kernels()) {
    INFO("kernel " << kernel_name(kernel));
    check_swiglu_experts(kernel, torch::kCPU, torch::kFloat32, 1e-4);
    // bf16 keeps 8 bits of mantissa: sums of 16 to 48 products of values near 1 drift by ~0.1.
    check_swiglu_experts(kernel, torch::kCPU, torch::kBFloat16, 0.25);
  }
}

namespace {

struct ReplicaRun {
  torch::Tensor out, input_grad, w_gate_up_grad, w_down_grad;
};

// Forward and backward of SwiGLU groups whose weight index names matrix 2 twice in one call,
// then a second call on matrix 0, on `threads` intra-op threads.
ReplicaRun replica_groups(const torch::Tensor& x, const torch::Tensor& grad_out,
                          const WeightBank& w_gate_up, const WeightBank& w_down,
                          const std::vector<int64_t>& offsets, const WeightIndex& index,
                          int threads) {
  const int previous = at::get_num_threads();
  at::set_num_threads(threads);
  const int64_t rows = x.size(0), ffn = w_down.size(2);
  ReplicaRun run;
  const torch::Tensor pre = torch::empty({rows, 2 * ffn});
  run.out = torch::empty_like(x);
  grouped_swiglu_forward_into(pre, run.out, torch::Tensor(), x, offsets, w_gate_up, w_down, index);
  SwiGLUWeightGrads grads{WeightGradSum(w_gate_up), WeightGradSum(w_down)};
  run.input_grad = grouped_swiglu_backward(grad_out, x, pre, offsets, w_gate_up, w_down, index,
                                           &grads, /*input_grads=*/true);
  const torch::Tensor extra = x.narrow(0, 0, 2);
  grouped_swiglu_backward(grad_out.narrow(0, 0, 2), extra,
                          grouped_pre_activations(extra, {0, 2}, w_gate_up, {0}), {0, 2}, w_gate_up,
                          w_down, {0}, &grads, /*input_grads=*/false);
  // A split bank's gradient, its parts one after the other.
  auto whole = [](const WeightBank& grad) { return torch::cat({grad.first(), grad.second()}); };
  run.w_gate_up_grad = whole(grads.w_gate_up.finish());
  run.w_down_grad = whole(grads.w_down.finish());
  at::set_num_threads(previous);
  return run;
}

}  // namespace

TEST_CASE(
    "the SwiGLU groups of replicas sum their gradients into their matrix, bit for bit the same on "
    "one thread or two",
    "[gemm]") {
  for (GroupedGemmKernel kernel : available_grouped_gemm_kernels()) {
    INFO("kernel " << kernel_name(kernel));
    KernelInUse in_use(kernel);
    torch::manual_seed(5);
    const std::vector<int64_t> offsets{0, 3, 5, 9, 10};
    const WeightIndex index{2, 0, 2, 1};  // matrix 3: no group
    const int64_t hidden = 8, ffn = 12;
    auto x = torch::randn({10, hidden});
    auto grad_out = torch::randn({10, hidden});
    auto w_gate_up = torch::randn({4, 2 * ffn, hidden}) * 0.3;
    auto w_down = torch::randn({4, hidden, ffn}) * 0.3;

    // Autograd through one plain expression per group, and the second call's rows.
    auto xr = x.clone().requires_grad_(), gr = w_gate_up.clone().requires_grad_(),
         dr = w_down.clone().requires_grad_();
    auto expert = [&](const torch::Tensor& rows, int64_t m) {
      auto pre = rows.matmul(gr[m].t());
      return (torch::silu(pre.narrow(1, 0, ffn)) * pre.narrow(1, ffn, ffn)).matmul(dr[m].t());
    };
    std::vector<torch::Tensor> slices;
    for (std::size_t g = 0; g < index.size(); ++g)
      slices.push_back(expert(xr.narrow(0, offsets[g], offsets[g + 1] - offsets[g]), index[g]));
    const torch::Tensor reference = torch::cat(slices);
    auto loss = (reference * grad_out).sum() +
                (expert(x.narrow(0, 0, 2), 0) * grad_out.narrow(0, 0, 2)).sum();
    loss.backward();

    const ReplicaRun two = replica_groups(x, grad_out, w_gate_up, w_down, offsets, index, 2);
    require_close(two.out, reference.detach(), 1e-4);
    require_close(two.input_grad, xr.grad(), 1e-4);
    require_close(two.w_gate_up_grad, gr.grad(), 1e-4);
    require_close(two.w_down_grad, dr.grad(), 1e-4);
    REQUIRE(two.w_down_grad[3].abs().max().item<double>() == 0.0);

    const ReplicaRun one = replica_groups(x, grad_out, w_gate_up, w_down, offsets, index, 1);
    CHECK(one.out.equal(two.out));
    CHECK(one.input_grad.equal(two.input_grad));
    CHECK(one.w_gate_up_grad.equal(two.w_gate_up_grad));
    CHECK(one.w_down_grad.equal(two.w_down_grad));

    // The same matrices in a bank of two tensors (held experts, then fetched ones): the same
    // products and gradients bit for bit, each part's gradient in a tensor of its own.
    const ReplicaRun split = replica_groups(
        x, grad_out, WeightBank(w_gate_up.narrow(0, 0, 3), w_gate_up.narrow(0, 3, 1)),
        WeightBank(w_down.narrow(0, 0, 1), w_down.narrow(0, 1, 3)), offsets, index, 2);
    CHECK(split.out.equal(two.out));
    CHECK(split.input_grad.equal(two.input_grad));
    CHECK(split.w_gate_up_grad.equal(two.w_gate_up_grad));
    CHECK(split.w_down_grad.equal(two.w_down_grad));
  }
}

TEST_CASE("on a GPU every grouped GEMM kernel matches the reference in bf16", "[gpu]") {
  const std::optional<torch::Device> gpu = test::gpu_or_skip();
  if (!gpu) return;
  for (GroupedGemmKernel kernel : available_grouped_gemm_kernels()) {
    INFO("kernel " << kernel_name(kernel));
    check_swiglu_experts(kernel, *gpu, torch::kFloat32, 1e-3);  // TF32 may be on
    check_swiglu_experts(kernel, *gpu, torch::kBFloat16, 0.25);
  }
}

TEST_CASE("the grouped GEMM kernel is chosen once from the setting, the device and the model",
          "[gemm]") {
  ModelConfig model = *find_preset("tiny-moe");
  model.hidden_size = 64;
  model.expert_ffn_size = 128;
  SECTION("auto keeps the thread-spread slice loop on the CPU") {
    const GroupedGemmSelection chosen =
        choose_grouped_gemm_kernel(GroupedGemmChoice::Auto, torch::kCPU, torch::kFloat32, model);
    REQUIRE(chosen.kernel == GroupedGemmKernel::SliceLoop);
    REQUIRE_THAT(chosen.reason, Catch::Contains("CPU"));
  }
  SECTION("slice-loop is always available") {
    REQUIRE(choose_grouped_gemm_kernel(GroupedGemmChoice::SliceLoop, torch::kCPU, torch::kBFloat16,
                                       model)
                .kernel == GroupedGemmKernel::SliceLoop);
  }
  SECTION("grouped-mm where the LibTorch has it and the dimensions suit it, else a located error") {
    if (compat::kHasGroupedMm) {
      REQUIRE(choose_grouped_gemm_kernel(GroupedGemmChoice::GroupedMm, torch::kCPU, torch::kFloat32,
                                         model)
                  .kernel == GroupedGemmKernel::GroupedMm);
      model.expert_ffn_size = 100;  // 200 bytes of bf16 per row: not a multiple of 16
      REQUIRE_THROWS_WITH(choose_grouped_gemm_kernel(GroupedGemmChoice::GroupedMm, torch::kCPU,
                                                     torch::kBFloat16, model),
                          Catch::Contains("train.grouped_gemm") && Catch::Contains("multiples"));
    } else {
      REQUIRE_THROWS_WITH(
          choose_grouped_gemm_kernel(GroupedGemmChoice::GroupedMm, torch::kCPU, torch::kFloat32,
                                     model),
          Catch::Contains("train.grouped_gemm") && Catch::Contains("at::_grouped_mm"));
    }
  }
}
