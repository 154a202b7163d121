#pragma once
// What the selection plugins share: they decide expert by expert, over each expert's segment
// [expert_offsets[e], expert_offsets[e+1]) of the pair order, on one CPU copy of the scores.
// A layer has ~10^4 pairs, so one copy is cheaper than a few small device kernels per expert.

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace lrmoe::policies {

// The scores as CPU float32 values. NaN (a diverging step) becomes 0, so that the sorts below
// keep the strict ordering they rely on.
inline std::vector<float> scores_on_cpu(const at::Tensor& scores) {
  const at::Tensor cpu = at::nan_to_num(scores.detach().to(at::kCPU, at::kFloat), 0.0).contiguous();
  return {cpu.data_ptr<float>(), cpu.data_ptr<float>() + cpu.numel()};
}

// The indices of the `limit` highest scores in [begin, end), in increasing order. Equal scores
// go to the lower index, so the choice is deterministic.
inline std::vector<int64_t> highest_scored(const std::vector<float>& scores, int64_t begin, int64_t end,
                                           int64_t limit) {
  std::vector<int64_t> order(static_cast<size_t>(end - begin));
  std::iota(order.begin(), order.end(), begin);
  const auto chosen = order.begin() + std::clamp<int64_t>(limit, 0, end - begin);
  std::partial_sort(order.begin(), chosen, order.end(), [&](int64_t a, int64_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  });
  order.erase(chosen, order.end());
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace lrmoe::policies
