#include "core/model/grouped_gemm.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>

#include "core/system/libtorch_compat.hpp"

namespace lrmoe {
namespace {

std::atomic<GroupedGemmKernel> process_kernel{GroupedGemmKernel::SliceLoop};

// Calls fn(expert, first_row, row_count) for every expert with rows. On CPU the experts are
// spread over LibTorch's intra-op threads in contiguous runs holding about the same number of
// rows, each GEMM running on one thread (core/system/threads.hpp gives OpenBLAS one thread per
// call): many small GEMMs parallelise better across experts than inside each one. Every expert's
// result is computed by one thread alone, so results do not depend on the thread count.
template <typename Fn>
void for_each_expert_slice(const torch::Tensor& like, const std::vector<int64_t>& offsets,
                           Fn&& fn) {
  const auto experts = static_cast<int64_t>(offsets.size()) - 1;
  auto run = [&](int64_t begin, int64_t end) {
    torch::NoGradGuard no_grad;  // worker threads do not inherit the caller's grad mode
    for (int64_t e = begin; e < end; ++e) {
      const int64_t count = offsets[e + 1] - offsets[e];
      if (count > 0) fn(e, offsets[e], count);
    }
  };
  const int64_t chunks = like.is_cuda() ? 1 : std::min<int64_t>(at::get_num_threads(), experts);
  if (chunks <= 1) {
    run(0, experts);
    return;
  }
  // Chunk c starts at the first expert whose rows begin at or after c / chunks of all rows.
  std::vector<int64_t> first_expert(static_cast<size_t>(chunks) + 1, experts);
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t row = offsets.back() * c / chunks;
    first_expert[c] = std::lower_bound(offsets.begin(), offsets.end() - 1, row) - offsets.begin();
  }
  at::parallel_for(0, chunks, /*grain_size=*/1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) run(first_expert[c], first_expert[c + 1]);
  });
}

// at::_grouped_mm's `offs`: every group's cumulative end, [experts] int32 on `device` (one small
// host-to-device copy per call on CUDA; Note [Host synchronisation] in docs/notes.md).
torch::Tensor group_ends(const std::vector<int64_t>& offsets, const torch::Device& device) {
  std::vector<int32_t> ends(offsets.begin() + 1, offsets.end());
  return torch::tensor(ends, torch::kInt32).to(device, /*non_blocking=*/true);
}

}  // namespace

const char* kernel_name(GroupedGemmKernel kernel) {
  return kernel == GroupedGemmKernel::GroupedMm ? "grouped-mm" : "slice-loop";
}

GroupedGemmKernel grouped_gemm_kernel() {
  return process_kernel.load(std::memory_order_relaxed);
}

void set_grouped_gemm_kernel(GroupedGemmKernel kernel) {
  process_kernel.store(kernel, std::memory_order_relaxed);
}

std::vector<GroupedGemmKernel> available_grouped_gemm_kernels() {
  if (compat::kHasGroupedMm) return {GroupedGemmKernel::SliceLoop, GroupedGemmKernel::GroupedMm};
  return {GroupedGemmKernel::SliceLoop};
}

torch::Tensor grouped_mm(const torch::Tensor& input, const std::vector<int64_t>& offsets,
                         const torch::Tensor& weights, bool transpose_weights) {
  if (grouped_gemm_kernel() == GroupedGemmKernel::GroupedMm) {
    const torch::Tensor b = transpose_weights ? weights.transpose(1, 2) : weights;
    return compat::grouped_mm(input.contiguous(), b, group_ends(offsets, input.device()));
  }
  const int64_t width = weights.size(transpose_weights ? 1 : 2);
  auto out = torch::empty({input.size(0), width}, input.options());
  for_each_expert_slice(input, offsets, [&](int64_t e, int64_t first, int64_t count) {
    auto out_slice = out.narrow(0, first, count);
    torch::mm_out(out_slice, input.narrow(0, first, count),
                  transpose_weights ? weights[e].t() : weights[e]);
  });
  return out;
}

torch::Tensor grouped_weight_grad(const torch::Tensor& grad_out, const torch::Tensor& input,
                                  const std::vector<int64_t>& offsets,
                                  const torch::Tensor& like_weights) {
  if (grouped_gemm_kernel() == GroupedGemmKernel::GroupedMm) {
    // Groups along the contraction: [n, rows] x [rows, k] -> [experts, n, k], zero where a group
    // is empty.
    return compat::grouped_mm(grad_out.contiguous().t(), input.contiguous(),
                              group_ends(offsets, input.device()))
        .to(like_weights.scalar_type());
  }
  // Every expert with rows is overwritten whole; only those without rows need zeros.
  auto grad = torch::empty_like(like_weights);
  for (std::size_t e = 0; e + 1 < offsets.size(); ++e) {
    if (offsets[e + 1] == offsets[e]) grad[static_cast<int64_t>(e)].zero_();
  }
  for_each_expert_slice(input, offsets, [&](int64_t e, int64_t first, int64_t count) {
    auto grad_e = grad[e];
    torch::mm_out(grad_e, grad_out.narrow(0, first, count).t(), input.narrow(0, first, count));
  });
  return grad;
}

}  // namespace lrmoe
