#include "core/model/grouped_gemm.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>

#include "core/system/libtorch_compat.hpp"

namespace lrmoe {
namespace {

std::atomic<GroupedGemmKernel> process_kernel{GroupedGemmKernel::SliceLoop};

// at::_grouped_mm's `offs`: every group's cumulative end, [experts] int32 on `device` (one small
// host-to-device copy per call on CUDA; Note [Host synchronisation] in docs/notes.md).
torch::Tensor group_ends(const std::vector<int64_t>& offsets, const torch::Device& device) {
  std::vector<int32_t> ends(offsets.begin() + 1, offsets.end());
  return torch::tensor(ends, torch::kInt32).to(device, /*non_blocking=*/true);
}

// [groups, n, k]: each group's grad_out^T @ input in one at::_grouped_mm call, grouped along the
// contraction, zero where a group is empty.
torch::Tensor grouped_mm_weight_grads(const torch::Tensor& grad_out, const torch::Tensor& input,
                                      const std::vector<int64_t>& offsets,
                                      torch::ScalarType dtype) {
  return compat::grouped_mm(grad_out.contiguous().t(), input.contiguous(),
                            group_ends(offsets, input.device()))
      .to(dtype);
}

}  // namespace

bool slice_tasks_on_host(const torch::Tensor& like) {
  return grouped_gemm_kernel() == GroupedGemmKernel::SliceLoop && like.device().is_cpu();
}

void for_each_slice(const torch::Tensor& like, const std::vector<int64_t>& offsets,
                    c10::function_ref<void(int64_t, int64_t, int64_t)> fn) {
  std::vector<int64_t> groups;  // with rows, largest first (ties in group order)
  for (int64_t g = 0; g + 1 < static_cast<int64_t>(offsets.size()); ++g)
    if (offsets[g + 1] > offsets[g]) groups.push_back(g);
  std::stable_sort(groups.begin(), groups.end(), [&](int64_t a, int64_t b) {
    return offsets[a + 1] - offsets[a] > offsets[b + 1] - offsets[b];
  });
  auto run = [&](int64_t g) {
    torch::NoGradGuard no_grad;  // worker threads do not inherit the caller's grad mode
    fn(g, offsets[g], offsets[g + 1] - offsets[g]);
  };
  const auto count = static_cast<int64_t>(groups.size());
  const int64_t threads = like.is_cpu() ? std::min<int64_t>(at::get_num_threads(), count) : 1;
  if (threads <= 1) {
    for (int64_t g : groups) run(g);
    return;
  }
  // Largest first, each thread taking the next group when it is done: the last groups taken
  // are the smallest, so the threads finish close together whatever the sizes.
  std::atomic<int64_t> next{0};
  at::parallel_for(0, threads, /*grain_size=*/1, [&](int64_t, int64_t) {
    for (int64_t i = next++; i < count; i = next++) run(groups[static_cast<std::size_t>(i)]);
  });
}

void slice_mm_out(const torch::Tensor& out, const torch::Tensor& input, const WeightBank& weights,
                  int64_t matrix, bool transpose_weights) {
  const torch::Tensor w = weights.matrix(matrix);
  torch::Tensor target = out;  // the same storage; mm_out takes a non-const reference
  torch::mm_out(target, input, transpose_weights ? w.t() : w);
}

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
                         const WeightBank& weights, bool transpose_weights,
                         const WeightIndex& weight_index) {
  const int64_t width = weights.size(transpose_weights ? 1 : 2);
  auto out = torch::empty({input.size(0), width}, input.options());
  grouped_mm_out(out, input, offsets, weights, transpose_weights, weight_index);
  return out;
}

void grouped_mm_out(const torch::Tensor& out, const torch::Tensor& input,
                    const std::vector<int64_t>& offsets, const WeightBank& weights,
                    bool transpose_weights, const WeightIndex& weight_index) {
  if (grouped_gemm_kernel() == GroupedGemmKernel::GroupedMm) {
    // at::_grouped_mm takes one matrix per group: indexed or split banks are gathered for it.
    const torch::Tensor per_group = weights.per_group(weight_index);
    const torch::Tensor b = transpose_weights ? per_group.transpose(1, 2) : per_group;
    out.copy_(compat::grouped_mm(input.contiguous(), b, group_ends(offsets, input.device())));
    return;
  }
  for_each_slice(input, offsets, [&](int64_t g, int64_t first, int64_t count) {
    slice_mm_out(out.narrow(0, first, count), input.narrow(0, first, count), weights,
                 matrix_of(weight_index, g), transpose_weights);
  });
}

torch::Tensor grouped_weight_grad(const torch::Tensor& grad_out, const torch::Tensor& input,
                                  const std::vector<int64_t>& offsets,
                                  const torch::Tensor& like_weights) {
  if (grouped_gemm_kernel() == GroupedGemmKernel::GroupedMm)
    return grouped_mm_weight_grads(grad_out, input, offsets, like_weights.scalar_type());
  // Every expert with rows is overwritten whole; only those without rows need zeros.
  auto grad = torch::empty_like(like_weights);
  for (std::size_t e = 0; e + 1 < offsets.size(); ++e) {
    if (offsets[e + 1] == offsets[e]) grad[static_cast<int64_t>(e)].zero_();
  }
  for_each_slice(input, offsets, [&](int64_t e, int64_t first, int64_t count) {
    auto grad_e = grad[e];
    torch::mm_out(grad_e, grad_out.narrow(0, first, count).t(), input.narrow(0, first, count));
  });
  return grad;
}

}  // namespace lrmoe

namespace lrmoe {

WeightGradSum::WeightGradSum(const WeightBank& like_weights)
    : grad_(like_weights.empty_like()),
      written_(static_cast<std::size_t>(like_weights.count()), 0) {}

void WeightGradSum::add(const torch::Tensor& grad_out, const torch::Tensor& input,
                        const std::vector<int64_t>& offsets, const WeightIndex& weight_index) {
  if (grouped_gemm_kernel() == GroupedGemmKernel::GroupedMm) {
    const auto groups = static_cast<int64_t>(offsets.size()) - 1;
    const torch::Tensor per_group =
        grouped_mm_weight_grads(grad_out, input, offsets, grad_.options().dtype().toScalarType());
    for (int64_t g = 0; g < groups; ++g) {
      if (offsets[g + 1] == offsets[g]) continue;
      const int64_t m = matrix_of(weight_index, g);
      if (written_[static_cast<std::size_t>(m)]) {
        grad_.matrix(m).add_(per_group[g]);
      } else {
        grad_.matrix(m).copy_(per_group[g]);
        written_[static_cast<std::size_t>(m)] = 1;
      }
    }
    return;
  }
  begin_call(offsets, weight_index);
  for_each_slice(input, offsets, [&](int64_t g, int64_t first, int64_t count) {
    add_group(g, grad_out.narrow(0, first, count), input.narrow(0, first, count));
  });
  end_call();
}

void WeightGradSum::begin_call(const std::vector<int64_t>& offsets,
                               const WeightIndex& weight_index) {
  const auto groups = static_cast<int64_t>(offsets.size()) - 1;
  call_matrices_.clear();
  first_in_call_.assign(static_cast<std::size_t>(groups), 0);
  later_.assign(static_cast<std::size_t>(groups), torch::Tensor());
  std::vector<char> seen(written_.size(), 0);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t m = matrix_of(weight_index, g);
    call_matrices_.push_back(m);
    if (offsets[g + 1] == offsets[g]) continue;
    first_in_call_[static_cast<std::size_t>(g)] = !seen[static_cast<std::size_t>(m)];
    seen[static_cast<std::size_t>(m)] = 1;
  }
}

void WeightGradSum::add_group(int64_t g, const torch::Tensor& grad_out_rows,
                              const torch::Tensor& input_rows) {
  const auto group = static_cast<std::size_t>(g);
  const int64_t m = call_matrices_[group];
  if (!first_in_call_[group]) {
    later_[group] = torch::mm(grad_out_rows.t(), input_rows);
    return;
  }
  torch::Tensor target = grad_.matrix(m);
  if (written_[static_cast<std::size_t>(m)]) {
    target.addmm_(grad_out_rows.t(), input_rows);
  } else {
    torch::mm_out(target, grad_out_rows.t(), input_rows);
  }
}

void WeightGradSum::end_call() {
  for (std::size_t g = 0; g < call_matrices_.size(); ++g) {
    const int64_t m = call_matrices_[g];
    if (later_[g].defined()) grad_.matrix(m).add_(later_[g]);
    if (first_in_call_[g] || later_[g].defined()) written_[static_cast<std::size_t>(m)] = 1;
  }
  later_.clear();
}

WeightBank WeightGradSum::finish() {
  for (std::size_t m = 0; m < written_.size(); ++m) {
    if (!written_[m]) grad_.matrix(static_cast<int64_t>(m)).zero_();
  }
  return grad_;
}

}  // namespace lrmoe
