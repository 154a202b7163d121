// The public plugin kit (lrmoe/expert_segments.hpp, lrmoe/static_owners.hpp): what an
// out-of-tree plugin gets to do what the built-in ones do.

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>

#include "lrmoe/plugin.hpp"

TEST_CASE(
    "static owners are contiguous blocks of ceil(E/R) experts, the last rank taking the remainder",
    "[plugin-kit]") {
  const std::vector<lrmoe::ExpertInstance> owners = lrmoe::static_owners(10, 4);
  REQUIRE(owners.size() == 10);
  REQUIRE(lrmoe::owned_experts_per_rank(10, 4) == 3);
  const std::vector<std::pair<int64_t, int64_t>> expected{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1},
                                                          {1, 2}, {2, 0}, {2, 1}, {2, 2}, {3, 0}};
  for (std::size_t e = 0; e < owners.size(); ++e) {
    CHECK(owners[e].expert == static_cast<int64_t>(e));
    CHECK(owners[e].owner);
    CHECK(std::make_pair(owners[e].rank, owners[e].slot) == expected[e]);
  }
}

TEST_CASE("expert segments cover the pair order expert by expert, empty experts included",
          "[plugin-kit]") {
  const std::vector<lrmoe::ExpertSegment> segments = lrmoe::expert_segments({0, 2, 2, 5});
  REQUIRE(segments.size() == 3);
  CHECK((segments[0].begin == 0 && segments[0].end == 2));
  CHECK(segments[1].size() == 0);
  CHECK((segments[2].expert == 2 && segments[2].begin == 2 && segments[2].size() == 3));
}

TEST_CASE(
    "highest_scored keeps the limit's best of one segment, ties to the lower index, in pair order",
    "[plugin-kit]") {
  const std::vector<float> scores =
      lrmoe::scores_on_cpu(at::tensor({9.0F, 1.0F, 3.0F, NAN, 3.0F, 2.0F}));
  CHECK(scores[3] == 0.0F);  // NaN scores as 0, so the order stays strict
  CHECK(lrmoe::highest_scored(scores, 1, 6, 2) == std::vector<int64_t>{2, 4});
  CHECK(lrmoe::highest_scored(scores, 1, 6, 3) == std::vector<int64_t>{2, 4, 5});
  CHECK(lrmoe::highest_scored(scores, 1, 6, 0).empty());
  CHECK(lrmoe::highest_scored(scores, 1, 3, 99) == std::vector<int64_t>{1, 2});
}

TEST_CASE("highest_scored chooses what a full sort by score, ties to the lower index, chooses",
          "[plugin-kit]") {
  // Few distinct values, so that most choices are between ties.
  std::mt19937 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t size = 1 + static_cast<int64_t>(random() % 300);
    std::vector<float> scores(static_cast<std::size_t>(size));
    for (float& score : scores) score = static_cast<float>(random() % 5);
    const int64_t begin = static_cast<int64_t>(random() % static_cast<uint32_t>(size));
    const int64_t limit = static_cast<int64_t>(random() % static_cast<uint32_t>(size + 2));
    std::vector<int64_t> sorted(static_cast<std::size_t>(size - begin));
    std::iota(sorted.begin(), sorted.end(), begin);
    std::stable_sort(sorted.begin(), sorted.end(),
                     [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
    sorted.resize(static_cast<std::size_t>(std::min(limit, size - begin)));
    std::sort(sorted.begin(), sorted.end());
    CHECK(lrmoe::highest_scored(scores, begin, size, limit) == sorted);
  }
}

TEST_CASE("positions_of_true gives the true entries in order without asking the device",
          "[plugin-kit]") {
  const at::Tensor mask = at::tensor({0, 1, 1, 0, 1}, at::kLong).to(at::kBool);
  CHECK(lrmoe::positions_of_true(mask, 3).equal(at::tensor({1, 2, 4}, at::kLong)));
  CHECK(lrmoe::positions_of_true(at::zeros({4}, at::kBool), 0).numel() == 0);
}

TEST_CASE(
    "highest_scored_per_expert keeps what highest_scored keeps expert by expert, sorting or "
    "looping, ties and NaN included",
    "[plugin-kit]") {
  at::manual_seed(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t experts = 6, pairs = 200;
    const at::Tensor expert_of = std::get<0>(at::sort(at::randint(experts, {pairs}, at::kLong)));
    // Few distinct values, so ties are common, and a few NaN.
    at::Tensor scores = at::randint(5, {pairs}, at::kFloat);
    scores.masked_fill_(at::rand({pairs}) < 0.05, NAN);
    const at::Tensor counts = at::bincount(expert_of, {}, experts);
    std::vector<int64_t> offsets{0}, limit;
    for (int64_t e = 0; e < experts; ++e) {
      offsets.push_back(offsets.back() + counts[e].item<int64_t>());
      limit.push_back(at::randint(-1, 50, {1}, at::kLong).item<int64_t>());  // past both ends
    }
    const std::vector<float> values = lrmoe::scores_on_cpu(scores);
    std::vector<int64_t> expected;
    for (const lrmoe::ExpertSegment& segment : lrmoe::expert_segments(offsets)) {
      const std::vector<int64_t> chosen =
          lrmoe::highest_scored(values, segment.begin, segment.end, limit[segment.expert]);
      expected.insert(expected.end(), chosen.begin(), chosen.end());
    }
    const at::Tensor chosen = at::tensor(expected, at::kLong);
    CHECK(lrmoe::highest_scored_per_expert(scores, expert_of, offsets, limit).equal(chosen));
    // The GPU's way, run here on the CPU.
    CHECK(lrmoe::highest_scored_by_sorting(scores, expert_of, offsets, limit).equal(chosen));
  }
}

TEST_CASE("make_selection leaves the weights undefined when none are given", "[plugin-kit]") {
  const lrmoe::Selection unweighted = lrmoe::make_selection({1, 4}, at::kCPU);
  CHECK(unweighted.kept.scalar_type() == at::kLong);
  CHECK(unweighted.kept.numel() == 2);
  CHECK_FALSE(unweighted.weights.defined());
  const lrmoe::Selection weighted = lrmoe::make_selection({1, 4}, {2.0F, 0.5F}, at::kCPU);
  CHECK(weighted.weights.scalar_type() == at::kFloat);
  CHECK(weighted.weights[1].item<float>() == 0.5F);
}
