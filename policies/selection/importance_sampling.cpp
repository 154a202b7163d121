// Selection "importance_sampling": VCAS-style unbiased sampling of a fixed size. For an expert
// with fewer quota than pairs, pair i is kept with probability p_i = min(1, c * s'_i), and a kept
// pair weighs 1 / p_i, so the expected weighted sum of any per-pair quantity (the expert's weight
// gradient) equals the full sum. The score is mixed with a uniform share,
//   s'_i = (1 - uniform_mix) * s_i / mean_e(s) + uniform_mix,
// so that no pair's probability (and no weight) becomes extreme; an expert whose scores are all
// zero samples uniformly (s' = 1). c solves sum_i p_i = quota.
// The pairs are drawn by systematic sampling: one uniform u per expert, and pair i is kept when an
// integer lies in [P_{i-1} + u, P_i + u), P being the running sum of p. Each pair is kept with
// probability exactly p_i (p_i <= 1), and the kept count is the quota in every step, never above
// it (independent draws, version 1, matched the quota only in expectation and could exceed the
// memory budget the quota was planned for; quota_topk gives the same count, biased).
// With uniform_mix = 0, a zero-score pair is never kept; when fewer pairs than the quota score
// above zero, those are all kept (p = 1) and the count falls short of the quota.
// An expert whose quota covers its pairs keeps them all with weight 1; quota 0 keeps none.

#include <ATen/CPUGeneratorImpl.h>
#include <lrmoe/plugin.hpp>

#include <functional>
#include <limits>

namespace {

// p_i = min(1, c * s'_i) for the pairs [begin, end) of one expert, with sum p_i = quota.
std::vector<double> keep_probabilities(const std::vector<float>& scores, int64_t begin, int64_t end,
                                       int64_t quota, double uniform_mix) {
  const auto count = static_cast<size_t>(end - begin);
  double total = 0;
  for (int64_t i = begin; i < end; ++i) {
    total += scores[i];
  }
  std::vector<double> mixed(count, 1.0);
  if (total > 0) {
    const double mean = total / static_cast<double>(count);
    for (size_t i = 0; i < count; ++i) {
      mixed[i] = (1 - uniform_mix) * scores[begin + static_cast<int64_t>(i)] / mean + uniform_mix;
    }
  }
  // Water-filling: with the k largest clamped to p = 1, the others share quota - k in proportion
  // to s'; k is the first for which the largest unclamped one stays <= 1. tail[k] sums the
  // sorted s' from k on, added smallest first for accuracy.
  std::vector<double> sorted = mixed;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  std::vector<double> tail(count + 1, 0.0);
  for (size_t k = count; k-- > 0;) {
    tail[k] = tail[k + 1] + sorted[k];
  }
  double c = std::numeric_limits<double>::infinity();  // only zero scores left unclamped
  for (size_t k = 0; k < count && tail[k] > 0; ++k) {
    const double share = static_cast<double>(quota) - static_cast<double>(k);
    if (share * sorted[k] <= tail[k]) {
      c = share / tail[k];
      break;
    }
  }
  for (double& p : mixed) {
    p = p > 0 ? std::min(1.0, c * p) : 0.0;
  }
  return mixed;
}

class ImportanceSampling : public lrmoe::SelectionPolicy {
 public:
  explicit ImportanceSampling(const lrmoe::Parameters& parameters)
      : uniform_mix_(parameters.real("uniform_mix")) {}

  lrmoe::Selection select(const lrmoe::PairBatch& pairs, const at::Tensor& scores) override {
    const std::vector<float> values = lrmoe::scores_on_cpu(scores);
    // A stream of its own: the random metric draws from pairs.seed too, and sampling with the
    // very numbers that are the scores would tie p_i to the draw and bias the estimate.
    const at::Generator generator =
        at::make_generator<at::CPUGeneratorImpl>(pairs.seed ^ kSamplingStream);
    const auto segments = lrmoe::expert_segments(pairs.expert_offsets);
    const at::Tensor uniform =
        at::rand({static_cast<int64_t>(segments.size())}, generator, at::kDouble);
    const double* draws = uniform.data_ptr<double>();

    std::vector<int64_t> kept;
    std::vector<float> weights;
    for (std::size_t e = 0; e < segments.size(); ++e) {
      const lrmoe::ExpertSegment& segment = segments[e];
      const int64_t begin = segment.begin, end = segment.end;
      const int64_t quota = pairs.quota[segment.expert];
      if (quota >= end - begin) {
        for (int64_t i = begin; i < end; ++i) {
          kept.push_back(i);
          weights.push_back(1.0F);
        }
      } else if (quota > 0) {
        const std::vector<double> p = keep_probabilities(values, begin, end, quota, uniform_mix_);
        // The next integer point u, u + 1, ... still to be passed by the running sum of p; the
        // count check guards against the sum's rounding reaching quota + u.
        double next_point = draws[e];
        double running = 0;
        int64_t taken = 0;
        for (int64_t i = begin; i < end && taken < quota; ++i) {
          const double p_i = p[static_cast<size_t>(i - begin)];
          running += p_i;
          if (running > next_point) {
            kept.push_back(i);
            weights.push_back(static_cast<float>(1.0 / p_i));
            next_point += 1;
            ++taken;
          }
        }
      }
    }
    return lrmoe::make_selection(kept, weights, scores.device());
  }

 private:
  static constexpr uint64_t kSamplingStream = 0x9E3779B97F4A7C15ULL;
  double uniform_mix_;
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<ImportanceSampling>(
      "importance_sampling", "2.0.0",
      "per expert, keep quota pairs, pair i with probability min(1, c * s_i), weight 1/p "
      "(unbiased; systematic sampling)",
      {lrmoe::real_parameter(
          "uniform_mix", 0.1,
          "share of the keep probability spread uniformly over the expert's pairs", 0, 1)},
      lrmoe::TensorPlace::Host);
}

}  // namespace

LRMOE_PLUGIN(describe)
