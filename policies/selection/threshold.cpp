// Selection "threshold": keep a pair when its score reaches `threshold` times the highest score
// of its expert, and at most the expert's quota of them (the highest). Unlike quota_topk it
// keeps fewer pairs than the quota when an expert's contributions are concentrated in a few
// pairs, saving backward work the quota would have allowed.

#include <lrmoe/plugin.hpp>

namespace {

class Threshold : public lrmoe::SelectionPolicy {
 public:
  explicit Threshold(const lrmoe::Parameters& parameters)
      : threshold_(parameters.real("threshold")) {}

  lrmoe::Selection select(const lrmoe::PairBatch& pairs, const at::Tensor& scores) override {
    const std::vector<float> values = lrmoe::scores_on_cpu(scores);
    std::vector<int64_t> kept;
    for (const lrmoe::ExpertSegment& segment : lrmoe::expert_segments(pairs.expert_offsets)) {
      const int64_t begin = segment.begin, end = segment.end;
      if (begin == end) {
        continue;
      }
      const double cutoff =
          threshold_ * *std::max_element(values.begin() + begin, values.begin() + end);
      // The pairs above the cutoff among the quota's highest are the highest above the cutoff.
      for (const int64_t i :
           lrmoe::highest_scored(values, begin, end, pairs.quota[segment.expert])) {
        if (values[i] >= cutoff) {
          kept.push_back(i);
        }
      }
    }
    return lrmoe::make_selection(kept, scores.device());
  }

 private:
  double threshold_;
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<Threshold>(
      "threshold", "1.0.0",
      "keep pairs scoring at least threshold * their expert's best, within the quota",
      {lrmoe::real_parameter("threshold", 0.5,
                             "share of the expert's highest score a kept pair reaches", 0, 1)},
      lrmoe::TensorPlace::Host);
}

}  // namespace

LRMOE_PLUGIN(describe)
