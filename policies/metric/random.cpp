// Metric "random": every pair scores uniform [0, 1), independently of its data. With quota_topk
// it is the random-retention control every comparison needs: the same number of pairs kept,
// chosen without looking at their contribution. A pair's score is a function of the pass's seed
// and its pair id alone, so a run repeats, and the exact and the scalable plan, on any number of
// processes, keep the same pairs (version 1 drew by position in the batch it was given: under
// the scalable plan every process drew the same sequence for its own pairs).

#include <lrmoe/plugin.hpp>

namespace {

// Mixed into the pass's seed: the selection sees the same seed (PairBatch::seed).
constexpr uint64_t kMetricStream = 0x72616e646f6dULL;  // "random"

class Random : public lrmoe::MetricPolicy {
 public:
  explicit Random(const lrmoe::Parameters&) {}
  at::Tensor score(const lrmoe::PairBatch& pairs) override {
    const at::Tensor ids = pairs.pair_ids.contiguous();
    at::Tensor scores = at::empty({ids.numel()}, at::kFloat);
    const int64_t* id = ids.data_ptr<int64_t>();
    float* score = scores.data_ptr<float>();
    const uint64_t seed = pairs.seed ^ kMetricStream;
    for (int64_t i = 0; i < ids.numel(); ++i)
      score[i] = lrmoe::uniform_at(seed, static_cast<uint64_t>(id[i]));
    return scores;
  }
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<Random>(
      "random", "2.0.0", "score = uniform [0, 1), a function of the pass's seed and the pair id",
      {}, lrmoe::TensorPlace::Host);
}

}  // namespace

LRMOE_PLUGIN(describe)
