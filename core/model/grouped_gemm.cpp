#include "core/model/grouped_gemm.hpp"

#include <ATen/Parallel.h>

#include <algorithm>

namespace lrmoe {
namespace {

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

}  // namespace

void grouped_mm(const torch::Tensor& input, const std::vector<int64_t>& offsets,
                const torch::Tensor& weights, bool transpose_weights, torch::Tensor& out) {
  for_each_expert_slice(input, offsets, [&](int64_t e, int64_t first, int64_t count) {
    auto out_slice = out.narrow(0, first, count);
    torch::mm_out(out_slice, input.narrow(0, first, count),
                  transpose_weights ? weights[e].t() : weights[e]);
  });
}

torch::Tensor grouped_weight_grad(const torch::Tensor& grad_out, const torch::Tensor& input,
                                  const std::vector<int64_t>& offsets,
                                  const torch::Tensor& like_weights) {
  auto grad = torch::zeros_like(like_weights);
  for_each_expert_slice(input, offsets, [&](int64_t e, int64_t first, int64_t count) {
    auto grad_e = grad[e];
    torch::mm_out(grad_e, grad_out.narrow(0, first, count).t(), input.narrow(0, first, count));
  });
  return grad;
}

}  // namespace lrmoe
