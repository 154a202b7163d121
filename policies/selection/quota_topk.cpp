// Selection "quota_topk": per expert, keep exactly min(pairs, quota) pairs, those with the
// highest scores (equal scores: the lower index, so every process chooses alike: Note [Exact
// multi-process plan]). LRMoE's deterministic contribution selection: it spends the quota on the
// pairs the metric ranks highest, at the price of a biased gradient.
// With rescale, each kept pair of expert e weighs pairs_e / kept_e, so that the expert's
// gradient keeps its scale (as if every pair contributed like the kept ones on average).

#include <lrmoe/plugin.hpp>

#include <algorithm>

namespace {

class QuotaTopK : public lrmoe::SelectionPolicy {
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
      const int64_t kept = std::clamp<int64_t>(pairs.quota[segment.expert], 0, segment.size());
      if (kept > 0) {
        weight[segment.expert] = static_cast<float>(segment.size()) / static_cast<float>(kept);
      }
    }
    selection.weights = at::tensor(weight, at::kFloat)
                            .to(scores.device())
                            .index_select(0, pairs.experts.index_select(0, selection.kept));
    return selection;
  }

 private:
  bool rescale_;
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<QuotaTopK>(
      "quota_topk", "1.0.0", "per expert, keep the quota's highest-scored pairs",
      {lrmoe::boolean_parameter(
          "rescale", false,
          "weigh each kept pair by pairs / kept of its expert, keeping the gradient's scale")});
}

}  // namespace

LRMOE_PLUGIN(describe)
