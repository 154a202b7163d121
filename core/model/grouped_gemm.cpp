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

int64_t matrix_of(const WeightIndex& weight_index, int64_t group) {
  return weight_index.empty() ? group : weight_index[static_cast<std::size_t>(group)];
}

// [groups, ...]: the matrix of each group, a copy only where an index is given.
torch::Tensor indexed_weights(const torch::Tensor& weights, const WeightIndex& weight_index) {
  if (weight_index.empty()) return weights;
  return weights.index_select(0, torch::tensor(weight_index, torch::kInt64).to(weights.device()));
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
                         const torch::Tensor& weights, bool transpose_weights,
                         const WeightIndex& weight_index) {
  const int64_t width = weights.size(transpose_weights ? 1 : 2);
  auto out = torch::empty({input.size(0), width}, input.options());
  grouped_mm_out(out, input, offsets, weights, transpose_weights, weight_index);
  return out;
}

void grouped_mm_out(const torch::Tensor& out, const torch::Tensor& input,
                    const std::vector<int64_t>& offsets, const torch::Tensor& weights,
                    bool transpose_weights, const WeightIndex& weight_index) {
  if (grouped_gemm_kernel() == GroupedGemmKernel::GroupedMm) {
    // at::_grouped_mm takes one matrix per group: the indexed ones are gathered for it.
    const torch::Tensor per_group = indexed_weights(weights, weight_index);
    const torch::Tensor b = transpose_weights ? per_group.transpose(1, 2) : per_group;
    out.copy_(compat::grouped_mm(input.contiguous(), b, group_ends(offsets, input.device())));
    return;
  }
  for_each_expert_slice(input, offsets, [&](int64_t g, int64_t first, int64_t count) {
    auto out_slice = out.narrow(0, first, count);
    const torch::Tensor w = weights[matrix_of(weight_index, g)];
    torch::mm_out(out_slice, input.narrow(0, first, count), transpose_weights ? w.t() : w);
  });
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

namespace lrmoe {

WeightGradSum::WeightGradSum(const torch::Tensor& like_weights)
    : grad_(torch::empty_like(like_weights)),
      written_(static_cast<std::size_t>(like_weights.size(0)), 0) {}

void WeightGradSum::add(const torch::Tensor& grad_out, const torch::Tensor& input,
                        const std::vector<int64_t>& offsets, const WeightIndex& weight_index) {
  const auto groups = static_cast<int64_t>(offsets.size()) - 1;
  // A matrix this call's groups name twice (two instances of one expert on one rank) would be
  // written by two threads at once: its later groups are summed into it after the parallel loop.
  std::vector<char> first_here(static_cast<std::size_t>(groups), 1);
  std::vector<char> seen(written_.size(), 0);
  for (int64_t g = 0; g < groups; ++g) {
    if (offsets[g + 1] == offsets[g]) continue;
    auto& matrix_seen = seen[static_cast<std::size_t>(matrix_of(weight_index, g))];
    first_here[static_cast<std::size_t>(g)] = !matrix_seen;
    matrix_seen = 1;
  }
  auto product = [&](int64_t first, int64_t count, torch::Tensor& out) {
    torch::mm_out(out, grad_out.narrow(0, first, count).t(), input.narrow(0, first, count));
  };
  if (grouped_gemm_kernel() == GroupedGemmKernel::GroupedMm) {
    const torch::Tensor per_group =
        grouped_weight_grad(grad_out, input, offsets, indexed_weights(grad_, weight_index));
    for (int64_t g = 0; g < groups; ++g) {
      if (offsets[g + 1] == offsets[g]) continue;
      const int64_t m = matrix_of(weight_index, g);
      if (written_[static_cast<std::size_t>(m)]) {
        grad_[m].add_(per_group[g]);
      } else {
        grad_[m].copy_(per_group[g]);
        written_[static_cast<std::size_t>(m)] = 1;
      }
    }
    return;
  }
  std::vector<torch::Tensor> later(static_cast<std::size_t>(groups));
  for_each_expert_slice(input, offsets, [&](int64_t g, int64_t first, int64_t count) {
    const int64_t m = matrix_of(weight_index, g);
    if (!first_here[static_cast<std::size_t>(g)]) {
      auto& out = later[static_cast<std::size_t>(g)];
      out = torch::empty_like(grad_[m]);
      product(first, count, out);
    } else if (written_[static_cast<std::size_t>(m)]) {
      auto target = grad_[m];
      target.addmm_(grad_out.narrow(0, first, count).t(), input.narrow(0, first, count));
    } else {
      auto target = grad_[m];
      product(first, count, target);
    }
  });
  for (int64_t g = 0; g < groups; ++g) {
    if (offsets[g + 1] == offsets[g]) continue;
    const int64_t m = matrix_of(weight_index, g);
    if (later[static_cast<std::size_t>(g)].defined())
      grad_[m].add_(later[static_cast<std::size_t>(g)]);
    written_[static_cast<std::size_t>(m)] = 1;
  }
}

torch::Tensor WeightGradSum::finish() {
  for (std::size_t m = 0; m < written_.size(); ++m) {
    if (!written_[m]) grad_[static_cast<int64_t>(m)].zero_();
  }
  return grad_;
}

}  // namespace lrmoe
