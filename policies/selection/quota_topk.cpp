// Selection "quota_topk": per expert, keep exactly min(pairs, quota) pairs, those with the
// highest scores (equal scores: the lower index, so every process chooses alike: Note [Exact
// multi-process plan]). LRMoE's deterministic contribution selection: it spends the quota on the
// pairs the metric ranks highest, at the price of a biased gradient.
// With rescale, each kept pair of expert e weighs pairs_e / kept_e, so that the expert's
// gradient keeps its scale (as if every pair contributed like the kept ones on average).
// A ranked selection: the scalable plan keeps the same pairs from a threshold per expert.

#include <lrmoe/plugin.hpp>

#include <algorithm>

namespace {

class QuotaTopK : public lrmoe::RankedSelectionPolicy {
 public:
  explicit QuotaTopK(const lrmoe::Parameters& parameters)
      : rescale_(parameters.boolean("rescale")) {}

  // Whole-tensor work on the scores' device: the plan does not wait for it here.
  lrmoe::Selection select(const lrmoe::PairBatch& pairs, const at::Tensor& scores) override {
    lrmoe::Selection selection;
    selection.kept =
        lrmoe::highest_scored_per_expert(scores, pairs.experts, pairs.expert_offsets, pairs.quota);
    if (!rescale_) return selection;
    std::vector<float> weight(pairs.quota.size(), 1.0F);
    for (const lrmoe::ExpertSegment& segment : lrmoe::expert_segments(pairs.expert_offsets)) {
      const int64_t kept = kept_count(segment.size(), pairs.quota[segment.expert]);
      if (kept > 0) weight[segment.expert] = kept_weight(segment.size(), kept);
    }
    selection.weights = at::tensor(weight, at::kFloat)
                            .to(scores.device())
                            .index_select(0, pairs.experts.index_select(0, selection.kept));
    return selection;
  }

  int64_t kept_count(int64_t pairs, int64_t quota) const override {
    return std::clamp<int64_t>(quota, 0, pairs);
  }
  float kept_weight(int64_t pairs, int64_t kept) const override {
    return rescale_ ? static_cast<float>(pairs) / static_cast<float>(kept) : 1.0F;
  }

 private:
  bool rescale_;
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<QuotaTopK>(
      "quota_topk", "1.1.0", "per expert, keep the quota's highest-scored pairs",
      {lrmoe::boolean_parameter(
          "rescale", false,
          "weigh each kept pair by pairs / kept of its expert, keeping the gradient's scale")});
}

}  // namespace

LRMOE_PLUGIN(describe)
