// Selection "threshold": keep a pair when its score reaches `threshold` times the highest score
// of its expert, and at most the expert's quota of them (the highest). Unlike quota_topk it
// keeps fewer pairs than the quota when an expert's contributions are concentrated in a few
// pairs, saving backward work the quota would have allowed.

#include <lrmoe/plugin.hpp>

#include "../common/expert_scores.hpp"

namespace {

class Threshold : public lrmoe::SelectionPolicy {
 public:
  explicit Threshold(const lrmoe::Parameters& parameters) : threshold_(parameters.real("threshold")) {}

  lrmoe::Selection select(const lrmoe::PairBatch& pairs, const at::Tensor& scores) override {
    const std::vector<float> values = lrmoe::policies::scores_on_cpu(scores);
    std::vector<int64_t> kept;
    for (size_t e = 0; e + 1 < pairs.expert_offsets.size(); ++e) {
      const int64_t begin = pairs.expert_offsets[e];
      const int64_t end = pairs.expert_offsets[e + 1];
      if (begin == end) {
        continue;
      }
      const double cutoff = threshold_ * *std::max_element(values.begin() + begin, values.begin() + end);
      // The pairs above the cutoff among the quota's highest are the highest above the cutoff.
      for (const int64_t i : lrmoe::policies::highest_scored(values, begin, end, pairs.quota[e])) {
        if (values[i] >= cutoff) {
          kept.push_back(i);
        }
      }
    }
    return {at::tensor(kept, at::kLong).to(scores.device()), at::Tensor()};
  }

 private:
  double threshold_;
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<Threshold>(
      "threshold", "1.0.0", "keep pairs scoring at least threshold * their expert's best, within the quota",
      {lrmoe::real_parameter("threshold", 0.5, "share of the expert's highest score a kept pair reaches", 0, 1)});
}

}  // namespace

LRMOE_PLUGIN(describe)
