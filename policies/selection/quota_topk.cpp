// Selection "quota_topk": per expert, keep exactly min(pairs, quota) pairs, those with the
// highest scores (equal scores: the lower index, so every process chooses alike: Note [Exact
// multi-process plan]). LRMoE's deterministic contribution selection: it spends the quota on the
// pairs the metric ranks highest, at the price of a biased gradient.
// With rescale, each kept pair of expert e weighs pairs_e / kept_e, so that the expert's
// gradient keeps its scale (as if every pair contributed like the kept ones on average).

#include <lrmoe/plugin.hpp>

namespace {

class QuotaTopK : public lrmoe::SelectionPolicy {
 public:
  explicit QuotaTopK(const lrmoe::Parameters& parameters)
      : rescale_(parameters.boolean("rescale")) {}

  lrmoe::Selection select(const lrmoe::PairBatch& pairs, const at::Tensor& scores) override {
    const std::vector<float> values = lrmoe::scores_on_cpu(scores);
    std::vector<int64_t> kept;
    std::vector<float> weights;
    for (const lrmoe::ExpertSegment& segment : lrmoe::expert_segments(pairs.expert_offsets)) {
      const int64_t begin = segment.begin, end = segment.end;
      const std::vector<int64_t> chosen =
          lrmoe::highest_scored(values, begin, end, pairs.quota[segment.expert]);
      kept.insert(kept.end(), chosen.begin(), chosen.end());
      if (rescale_ && !chosen.empty()) {
        weights.insert(weights.end(), chosen.size(),
                       static_cast<float>(end - begin) / static_cast<float>(chosen.size()));
      }
    }
    return rescale_ ? lrmoe::make_selection(kept, weights, scores.device())
                    : lrmoe::make_selection(kept, scores.device());
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
