#pragma once
// Plugin kit: working expert by expert over the pair order, as the built-in selections do.
//
// The pairs a metric scores and a selection chooses from are sorted by expert (Note [Pair order]
// in docs/notes.md): expert e's pairs are the segment [expert_offsets[e], expert_offsets[e+1]).
// Two ways to work with them: whole-tensor helpers that stay on the scores' device and never
// wait for it (highest_scored_per_expert), and loops over one CPU copy of the scores for choices
// that are easier to write per expert (a policy using those declares TensorPlace::Host, so the
// pipeline hands it CPU tensors: lrmoe/plugin.hpp). Header-only: using them adds nothing to the
// plugin ABI.

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

// The positions of the true entries of `mask` ([n] bool), increasing, when the caller knows
// how many there are (`count`): a stable sort instead of nonzero(), which on a GPU would make
// the host wait to learn the count.
inline at::Tensor positions_of_true(const at::Tensor& mask, int64_t count) {
  const at::Tensor falses_last = mask.logical_not().to(at::kByte);
  return std::get<1>(at::sort(falses_last, /*stable=*/true, /*dim=*/0, /*descending=*/false))
      .narrow(0, 0, count);
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
  // Ties go to the earlier pair, so the order is total and its first `limit` pairs are one set:
  // a selection in linear time gives them as a sort would, in any order (they are sorted below).
  std::nth_element(order.begin(), chosen, order.end(), [&](int64_t a, int64_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  });
  order.erase(chosen, order.end());
  std::sort(order.begin(), order.end());
  return order;
}

// highest_scored_per_expert's choice in whole-tensor sorts: no per-expert kernels and no wait
// for the device.
inline at::Tensor highest_scored_by_sorting(const at::Tensor& scores, const at::Tensor& experts,
                                            const std::vector<int64_t>& expert_offsets,
                                            const std::vector<int64_t>& limit) {
  const at::Device device = experts.device();
  const int64_t pairs = experts.numel();
  std::vector<int64_t> kept_per_expert(limit.size());
  int64_t kept = 0;
  for (std::size_t e = 0; e < limit.size(); ++e) {
    const int64_t size = expert_offsets[e + 1] - expert_offsets[e];
    kept_per_expert[e] = std::clamp<int64_t>(limit[e], 0, size);
    kept += kept_per_expert[e];
  }
  if (kept == pairs) return at::arange(pairs, experts.options().dtype(at::kLong));
  // Falling score, then stably by expert: each expert's pairs by falling score, ties in pair
  // order, one run per expert starting at its offset.
  const at::Tensor values = at::nan_to_num(scores.detach().to(device, at::kFloat), 0.0);
  const at::Tensor by_score =
      std::get<1>(at::sort(values, /*stable=*/true, 0, /*descending=*/true));
  const at::Tensor order = by_score.index_select(
      0, std::get<1>(at::sort(experts.index_select(0, by_score), /*stable=*/true, 0, false)));
  const at::Tensor ordered_experts = experts.index_select(0, order);
  const auto on_device = [&](const std::vector<int64_t>& values_per_expert) {
    return at::tensor(values_per_expert, at::kLong).to(device).index_select(0, ordered_experts);
  };
  const at::Tensor place_in_expert =
      at::arange(pairs, experts.options().dtype(at::kLong)) - on_device(expert_offsets);
  const at::Tensor chosen =
      order.index_select(0, positions_of_true(place_in_expert < on_device(kept_per_expert), kept));
  return std::get<0>(at::sort(chosen));
}

// Per expert e, the min(pairs of e, limit[e]) pairs with the highest scores, as increasing
// indices into the pair order ([kept] int64 on the experts' device). Equal scores go to the
// lower index and NaN counts as 0, as in highest_scored: every process chooses alike (Note
// [Exact multi-process plan]). `experts`: [pairs] int64 sorted, `expert_offsets` and `limit` on
// the host. On a GPU it sorts whole tensors (highest_scored_by_sorting); on the CPU, where
// a linear-time selection per expert is cheaper than two full sorts, it loops (the two choose
// alike).
inline at::Tensor highest_scored_per_expert(const at::Tensor& scores, const at::Tensor& experts,
                                            const std::vector<int64_t>& expert_offsets,
                                            const std::vector<int64_t>& limit) {
  if (!experts.is_cpu()) {
    return highest_scored_by_sorting(scores, experts, expert_offsets, limit);
  }
  bool all = true;
  for (std::size_t e = 0; all && e < limit.size(); ++e)
    all = limit[e] >= expert_offsets[e + 1] - expert_offsets[e];
  if (all) return at::arange(experts.numel(), experts.options().dtype(at::kLong));
  const std::vector<float> values = scores_on_cpu(scores);
  std::vector<int64_t> kept;
  for (const ExpertSegment& segment : expert_segments(expert_offsets)) {
    const std::vector<int64_t> chosen =
        highest_scored(values, segment.begin, segment.end, limit[segment.expert]);
    kept.insert(kept.end(), chosen.begin(), chosen.end());
  }
  return at::tensor(kept, at::kLong);
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
