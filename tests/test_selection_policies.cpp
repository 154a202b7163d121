// The built-in selection plugins: keep_all, quota_topk (against a hand-worked example and over
// random batches), threshold, and importance_sampling (its unbiasedness by Monte Carlo, its fixed
// count, and its water-filled keep probabilities).

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "support/builtin_policies.hpp"

using lrmoe::PairBatch;
using lrmoe_test::load;
using lrmoe_test::pair_batch;
using lrmoe_test::sum;
using lrmoe_test::to_floats;
using lrmoe_test::to_vector;

TEST_CASE("keep_all keeps every pair unweighted", "[policies]") {
  const PairBatch pairs = pair_batch({3, 0, 2}, {0, 0, 1});
  const lrmoe::Selection kept =
      load<lrmoe::SelectionPolicy>("keep_all")->select(pairs, at::zeros({5}));
  CHECK(to_vector(kept.kept) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(kept.kept.scalar_type() == at::kLong);
  CHECK_FALSE(kept.weights.defined());
}

TEST_CASE("quota_topk keeps the quota's highest-scored pairs of each expert", "[policies]") {
  // Expert 0: pairs 0..4, quota 3; expert 1: no pairs, quota 2; expert 2: pairs 5..7, quota 0;
  // expert 3: pairs 8..9, quota 5 (more than its pairs).
  const PairBatch pairs = pair_batch({5, 0, 3, 2}, {3, 2, 0, 5});
  const at::Tensor scores =
      at::tensor({0.3F, 0.9F, 0.3F, 0.1F, 0.9F, 5.0F, 6.0F, 7.0F, 0.0F, 0.2F});
  // Expert 0: 0.9 (pairs 1 and 4), then 0.3 twice: the lower index, pair 0.
  const lrmoe::Selection plain = load<lrmoe::SelectionPolicy>("quota_topk")->select(pairs, scores);
  CHECK(to_vector(plain.kept) == std::vector<int64_t>{0, 1, 4, 8, 9});
  CHECK_FALSE(plain.weights.defined());

  // Rescaled: expert 0 keeps 3 of 5 (weight 5/3), expert 3 all of its 2 (weight 1).
  const lrmoe::Selection rescaled =
      load<lrmoe::SelectionPolicy>("quota_topk", {{"rescale", true}})->select(pairs, scores);
  CHECK(to_vector(rescaled.kept) == to_vector(plain.kept));
  const std::vector<float> weights = to_floats(rescaled.weights);
  REQUIRE(weights.size() == 5);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(weights[i] == Approx(5.0 / 3.0));
  }
  CHECK(weights[3] == 1.0F);
  CHECK(weights[4] == 1.0F);

  const at::Tensor none = load<lrmoe::SelectionPolicy>("quota_topk")
                              ->select(pair_batch({2, 0}, {0, 0}), at::ones({2}))
                              .kept;
  CHECK(none.numel() == 0);
  CHECK(none.scalar_type() == at::kLong);
}

TEST_CASE("quota_topk keeps exactly min(pairs, quota) per expert over random batches",
          "[policies]") {
  std::mt19937 random(11);
  const auto policy = load<lrmoe::SelectionPolicy>("quota_topk");
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<int64_t> sizes(6);
    std::vector<int64_t> quota(6);
    for (size_t e = 0; e < sizes.size(); ++e) {
      sizes[e] = std::uniform_int_distribution<int64_t>(0, 30)(random);
      quota[e] = std::uniform_int_distribution<int64_t>(0, 35)(random);
    }
    const PairBatch pairs = pair_batch(sizes, quota);
    // Few distinct values, so ties are common.
    const at::Tensor scores = at::randint(0, 5, {sum(sizes)}, at::kFloat);
    const std::vector<float> values = to_floats(scores);
    const std::vector<int64_t> kept = to_vector(policy->select(pairs, scores).kept);
    REQUIRE(std::is_sorted(kept.begin(), kept.end()));
    REQUIRE(std::adjacent_find(kept.begin(), kept.end()) == kept.end());
    for (size_t e = 0; e < sizes.size(); ++e) {
      const int64_t begin = pairs.expert_offsets[e];
      const int64_t end = pairs.expert_offsets[e + 1];
      std::vector<bool> is_kept(static_cast<size_t>(end - begin), false);
      for (const int64_t i : kept) {
        if (i >= begin && i < end) is_kept[static_cast<size_t>(i - begin)] = true;
      }
      REQUIRE(std::count(is_kept.begin(), is_kept.end(), true) == std::min(sizes[e], quota[e]));
      // Every kept pair beats every dropped one: higher score, or equal score and lower index.
      for (int64_t a = begin; a < end; ++a) {
        for (int64_t b = begin; b < end; ++b) {
          if (is_kept[static_cast<size_t>(a - begin)] && !is_kept[static_cast<size_t>(b - begin)]) {
            REQUIRE((values[a] > values[b] || (values[a] == values[b] && a < b)));
          }
        }
      }
    }
  }
}

TEST_CASE("A ranked selection keeps per expert its kept_count, weighed its kept_weight",
          "[policies]") {
  // The scalable plan keeps kept_count pairs of each expert by a threshold and weighs them
  // kept_weight (Note [Scalable planning]); select() must keep and weigh the same.
  std::mt19937 random(19);
  const std::vector<std::pair<std::string, bool>> selections = {
      {"quota_topk", false}, {"quota_topk", true}, {"keep_all", false}};
  for (const auto& [name, rescale] : selections) {
    INFO(name << ", rescale " << rescale);
    const auto policy = name == "quota_topk"
                            ? load<lrmoe::SelectionPolicy>(name, {{"rescale", rescale}})
                            : load<lrmoe::SelectionPolicy>(name);
    const auto ranked = std::dynamic_pointer_cast<lrmoe::RankedSelectionPolicy>(policy);
    REQUIRE(ranked != nullptr);
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<int64_t> sizes(5), quota(5);
      for (size_t e = 0; e < sizes.size(); ++e) {
        sizes[e] = std::uniform_int_distribution<int64_t>(0, 20)(random);
        quota[e] = std::uniform_int_distribution<int64_t>(0, 25)(random);
      }
      if (name == "keep_all") quota = sizes;  // it keeps every pair, which a quota must allow
      const PairBatch pairs = pair_batch(sizes, quota);
      const lrmoe::Selection selection = policy->select(pairs, at::rand({sum(sizes)}, at::kFloat));
      const std::vector<int64_t> kept = to_vector(selection.kept);
      const std::vector<float> weights = selection.weights.defined()
                                             ? to_floats(selection.weights)
                                             : std::vector<float>(kept.size(), 1.0F);
      const std::vector<int64_t> experts = to_vector(pairs.experts);
      for (size_t e = 0; e < sizes.size(); ++e) {
        const int64_t expected = ranked->kept_count(sizes[e], quota[e]);
        int64_t count = 0;
        for (size_t k = 0; k < kept.size(); ++k) {
          if (experts[static_cast<size_t>(kept[k])] != static_cast<int64_t>(e)) continue;
          ++count;
          CHECK(weights[k] == ranked->kept_weight(sizes[e], expected));
        }
        CHECK(count == expected);
      }
    }
  }
}

TEST_CASE("threshold keeps the pairs near their expert's best, within the quota", "[policies]") {
  // Expert 0: pairs 0..4, best 0.9; expert 1: pairs 5..7, all zero; expert 2: pairs 8..9.
  const at::Tensor scores =
      at::tensor({0.3F, 0.9F, 0.45F, 0.1F, 0.9F, 0.0F, 0.0F, 0.0F, 4.0F, 1.0F});
  const auto select = [&](double threshold, std::vector<int64_t> quota) {
    const PairBatch pairs = pair_batch({5, 3, 2}, std::move(quota));
    const lrmoe::Selection kept =
        load<lrmoe::SelectionPolicy>("threshold", {{"threshold", threshold}})
            ->select(pairs, scores);
    CHECK_FALSE(kept.weights.defined());
    return to_vector(kept.kept);
  };
  // 0.5 * 0.9 = 0.45: pairs 1, 2 (exactly at the cutoff) and 4; all zero scores reach 0 * 0.5;
  // 0.5 * 4 = 2: only pair 8.
  CHECK(select(0.5, {5, 5, 5}) == std::vector<int64_t>{1, 2, 4, 5, 6, 7, 8});
  // Fewer than the quota pass: the quota only caps, keeping the highest (ties: lower index).
  CHECK(select(0.5, {2, 1, 0}) == std::vector<int64_t>{1, 4, 5});
  // Threshold 0 is quota_topk; threshold 1 keeps only the best.
  CHECK(select(0.0, {4, 2, 1}) == std::vector<int64_t>{0, 1, 2, 4, 5, 6, 8});
  CHECK(select(1.0, {5, 1, 5}) == std::vector<int64_t>{1, 4, 5, 8});
}

TEST_CASE("importance_sampling is unbiased and keeps exactly the quota in every step",
          "[policies]") {
  // Expert 0: 6 pairs, quota 3, uneven scores with one zero; expert 1: 4 pairs of score zero,
  // quota 2 (sampled uniformly); expert 2: 3 pairs, quota 5 (all kept, weight 1); expert 3:
  // 2 pairs, quota 0 (none kept).
  PairBatch pairs = pair_batch({6, 4, 3, 2}, {3, 2, 5, 0});
  const at::Tensor scores = at::tensor(
      {0.1F, 0.5F, 2.0F, 0.0F, 1.0F, 3.0F, 0.0F, 0.0F, 0.0F, 0.0F, 1.0F, 2.0F, 3.0F, 1.0F, 1.0F});
  // Per-pair quantities whose per-expert sums the weighted kept pairs estimate.
  const std::vector<double> value = {1.5, 0.2, 3.0, 2.5, 0.7, 1.1, 4.0, 0.5,
                                     2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0};
  const auto policy = load<lrmoe::SelectionPolicy>("importance_sampling");

  const std::vector<int64_t> expert_of = to_vector(pairs.experts);
  const int draws = 4000;
  std::vector<double> estimate_sum(4, 0.0), estimate_square(4, 0.0), kept_sum(4, 0.0);
  for (int draw = 0; draw < draws; ++draw) {
    pairs.seed = static_cast<uint64_t>(1000 + draw);
    const lrmoe::Selection selection = policy->select(pairs, scores);
    const std::vector<int64_t> kept = to_vector(selection.kept);
    const std::vector<float> weights = to_floats(selection.weights);
    REQUIRE(kept.size() == weights.size());
    REQUIRE(std::is_sorted(kept.begin(), kept.end()));
    std::vector<double> estimate(4, 0.0);
    std::vector<int64_t> kept_now(4, 0);
    for (size_t j = 0; j < kept.size(); ++j) {
      const auto e = static_cast<size_t>(expert_of[static_cast<size_t>(kept[j])]);
      REQUIRE(e != 3);
      if (e == 2) REQUIRE(weights[j] == 1.0F);
      REQUIRE(weights[j] >= 1.0F);
      estimate[e] += weights[j] * value[static_cast<size_t>(kept[j])];
      kept_sum[e] += 1;
      kept_now[e] += 1;
    }
    // Systematic sampling: the quota (or every pair, when it covers them) in each draw.
    REQUIRE(kept_now == std::vector<int64_t>{3, 2, 3, 0});
    for (size_t e = 0; e < 4; ++e) {
      estimate_sum[e] += estimate[e];
      estimate_square[e] += estimate[e] * estimate[e];
    }
  }
  for (size_t e = 0; e < 3; ++e) {
    INFO("expert " << e);
    const int64_t begin = pairs.expert_offsets[e];
    const int64_t end = pairs.expert_offsets[e + 1];
    const double truth = std::accumulate(value.begin() + begin, value.begin() + end, 0.0);
    const double mean = estimate_sum[e] / draws;
    const double standard_error =
        std::sqrt(std::max(0.0, estimate_square[e] / draws - mean * mean) / draws);
    CHECK(std::abs(mean - truth) < 4 * standard_error + 1e-9);
    const double expected_kept = static_cast<double>(std::min(pairs.quota[e], end - begin));
    CHECK(kept_sum[e] / draws == Approx(expected_kept).epsilon(0.05));
  }
  CHECK(kept_sum[2] == 3.0 * draws);  // quota >= pairs: always all
  CHECK(kept_sum[3] == 0.0);
}

TEST_CASE("importance_sampling's keep probabilities water-fill to the quota", "[policies]") {
  const PairBatch pairs = pair_batch({5}, {2});
  const at::Tensor scores = at::tensor({10.0F, 1.0F, 1.0F, 1.0F, 1.0F});
  const auto weights_of = [&](double uniform_mix, uint64_t seed) {
    PairBatch seeded = pairs;
    seeded.seed = seed;
    const lrmoe::Selection selection =
        load<lrmoe::SelectionPolicy>("importance_sampling", {{"uniform_mix", uniform_mix}})
            ->select(seeded, scores);
    std::map<int64_t, float> weights;
    const std::vector<int64_t> kept = to_vector(selection.kept);
    const std::vector<float> values = to_floats(selection.weights);
    for (size_t j = 0; j < kept.size(); ++j) weights[kept[j]] = values[j];
    return weights;
  };
  for (uint64_t seed = 0; seed < 20; ++seed) {
    // uniform_mix 0: s' = s / mean = [3.57, 0.357 x 4]. 2 * 3.57 > 5: pair 0 is clamped to p = 1;
    // the other four share 2 - 1 = 1 in proportion to s': p = 0.25 each, weight 4.
    const std::map<int64_t, float> sharp = weights_of(0.0, seed);
    REQUIRE(sharp.count(0) == 1);
    CHECK(sharp.at(0) == 1.0F);
    for (const auto& [pair, weight] : sharp) {
      if (pair != 0) CHECK(weight == Approx(4.0));
    }
    // uniform_mix 1: s' = 1, p = 2 / 5, weight 2.5 for every kept pair.
    for (const auto& [pair, weight] : weights_of(1.0, seed)) {
      CHECK(weight == Approx(2.5));
    }
  }
}
