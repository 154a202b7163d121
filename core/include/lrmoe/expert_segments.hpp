#pragma once
// Plugin kit: working expert by expert over the pair order, as the built-in selections do.
//
// The pairs a metric scores and a selection chooses from are sorted by expert (Note [Pair order]
// in docs/notes.md): expert e's pairs are the segment [expert_offsets[e], expert_offsets[e+1]).
// A layer has ~10^4 pairs, so the helpers below work on one CPU copy of the scores, which is
// cheaper than a few small device kernels per expert. Header-only: using them adds nothing to
// the plugin ABI.

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "lrmoe/selection.hpp"

namespace lrmoe {

// Expert e's pairs: indices [begin, end) into the pair order.
struct ExpertSegment {
  int64_t expert = 0;
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// Every expert's segment, in expert order (empty segments included).
inline std::vector<ExpertSegment> expert_segments(const std::vector<int64_t>& expert_offsets) {
  std::vector<ExpertSegment> segments;
  for (std::size_t e = 0; e + 1 < expert_offsets.size(); ++e) {
    segments.push_back({static_cast<int64_t>(e), expert_offsets[e], expert_offsets[e + 1]});
  }
  return segments;
}

// The scores as CPU float32 values. NaN (a diverging step) becomes 0, so that the sorts below
// keep the strict ordering they rely on.
inline std::vector<float> scores_on_cpu(const at::Tensor& scores) {
  const at::Tensor cpu = at::nan_to_num(scores.detach().to(at::kCPU, at::kFloat), 0.0).contiguous();
  return {cpu.data_ptr<float>(), cpu.data_ptr<float>() + cpu.numel()};
}

// The indices of the `limit` highest scores in [begin, end), in increasing order. Equal scores
// go to the lower index, so the choice is deterministic (every process must choose alike:
// Note [Exact multi-process plan]).
inline std::vector<int64_t> highest_scored(const std::vector<float>& scores, int64_t begin,
                                           int64_t end, int64_t limit) {
  std::vector<int64_t> order(static_cast<std::size_t>(end - begin));
  std::iota(order.begin(), order.end(), begin);
  const auto chosen = order.begin() + std::clamp<int64_t>(limit, 0, end - begin);
  std::partial_sort(order.begin(), chosen, order.end(), [&](int64_t a, int64_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  });
  order.erase(chosen, order.end());
  std::sort(order.begin(), order.end());
  return order;
}

// A Selection built on the CPU, as tensors on `device` (the scores' device): `kept` increasing
// indices into the pair order, every weight 1 (weights left undefined).
inline Selection make_selection(const std::vector<int64_t>& kept, const at::Device& device) {
  Selection selection;
  selection.kept = at::tensor(kept, at::kLong).to(device);
  return selection;
}

// The same with a weight per kept pair.
inline Selection make_selection(const std::vector<int64_t>& kept, const std::vector<float>& weights,
                                const at::Device& device) {
  Selection selection = make_selection(kept, device);
  selection.weights = at::tensor(weights, at::kFloat).to(device);
  return selection;
}

}  // namespace lrmoe
