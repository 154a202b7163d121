// pair_order_group_counts (core/pipeline/expert_counts.hpp): the scalable plan's pairs per
// (home rank, expert), found by a search for each group's end in pairs that are in pair order,
// must be the bincount of those pairs; pair_order_labels, which lays the groups out again, must
// give the pairs their own experts and home ranks; pair_order_ids must number a process's pairs
// as one process holding every pair would.

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "core/pipeline/expert_counts.hpp"

using namespace lrmoe;

TEST_CASE("Group counts of pairs in pair order are their bincount", "[counts]") {
  std::mt19937 random(31);
  auto below = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(random); };
  for (int trial = 0; trial < 200; ++trial) {
    // One process's ranks among `ranks`; experts and home ranks some of which have no pairs.
    const int64_t ranks = 1 + below(6), experts = 1 + below(9);
    const int64_t first = below(ranks), mine = 1 + below(ranks - first);
    std::vector<std::pair<int64_t, int64_t>> pairs(static_cast<std::size_t>(below(120)));
    for (auto& [expert, home] : pairs) expert = below(experts), home = first + below(mine);
    std::sort(pairs.begin(), pairs.end());
    std::vector<int64_t> expert_of, home_of;
    for (const auto& [expert, home] : pairs) expert_of.push_back(expert), home_of.push_back(home);
    const torch::Tensor e = torch::tensor(expert_of, torch::kInt64);
    const torch::Tensor h = torch::tensor(home_of, torch::kInt64);
    CHECK(pair_order_group_counts(h, ranks, e, experts) ==
          host_counts({{h, ranks, e, experts}}).front());
  }
}

TEST_CASE("Group counts refuse an expert or home rank out of range", "[counts]") {
  const torch::Tensor e = torch::tensor(std::vector<int64_t>{0, 1, 3}, torch::kInt64);
  const torch::Tensor h = torch::tensor(std::vector<int64_t>{0, 0, 1}, torch::kInt64);
  CHECK_THROWS_WITH(pair_order_group_counts(h, 2, e, 3), Catch::Contains("outside"));
  CHECK_THROWS_WITH(pair_order_group_counts(h, 1, e, 4), Catch::Contains("outside"));
  CHECK(pair_order_group_counts(h, 2, e, 4) == std::vector<int64_t>{1, 1, 0, 0, 0, 0, 0, 1});
}

TEST_CASE("Group counts refuse groups out of pair order", "[counts]") {
  // Expert 1's pairs before expert 0's, and within expert 0 home rank 1 before home rank 0.
  const torch::Tensor h = torch::tensor(std::vector<int64_t>{0, 0}, torch::kInt64);
  CHECK_THROWS_WITH(
      pair_order_group_counts(h, 2, torch::tensor(std::vector<int64_t>{1, 0}, torch::kInt64), 2),
      Catch::Contains("not in pair order"));
  CHECK_THROWS_WITH(
      pair_order_group_counts(torch::tensor(std::vector<int64_t>{1, 0}, torch::kInt64), 2,
                              torch::zeros({2}, torch::kInt64), 2),
      Catch::Contains("not in pair order"));
}

TEST_CASE("Pair labels laid out from group offsets are the pairs' own experts and home ranks",
          "[counts]") {
  std::mt19937 random(37);
  auto below = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(random); };
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t experts = 1 + below(9), first = below(5), mine = 1 + below(4);
    std::vector<std::pair<int64_t, int64_t>> pairs(static_cast<std::size_t>(below(120)));
    for (auto& [expert, home] : pairs) expert = below(experts), home = first + below(mine);
    std::sort(pairs.begin(), pairs.end());
    // The groups' offsets by (expert, home rank here), as home_group_offsets lays them out.
    std::vector<int64_t> offsets(1, 0), expert_of, home_of;
    for (int64_t e = 0; e < experts; ++e) {
      for (int64_t h = first; h < first + mine; ++h) {
        const auto in_group = std::count(pairs.begin(), pairs.end(), std::make_pair(e, h));
        offsets.push_back(offsets.back() + in_group);
      }
    }
    for (const auto& [expert, home] : pairs) expert_of.push_back(expert), home_of.push_back(home);
    const PairLabels labels = pair_order_labels(offsets, mine, first, torch::kCPU);
    CHECK(labels.experts.equal(torch::tensor(expert_of, torch::kInt64)));
    CHECK(labels.home.equal(torch::tensor(home_of, torch::kInt64)));
  }
  CHECK_THROWS_WITH(pair_order_labels({0, 2, 1}, 1, 0, torch::kCPU), Catch::Contains("spans"));
  CHECK_THROWS_WITH(pair_order_labels({0, 2, 3, 4}, 2, 0, torch::kCPU),
                    Catch::Contains("group offsets"));
  CHECK_THROWS_WITH(pair_order_labels({1, 2, 3}, 1, 0, torch::kCPU),
                    Catch::Contains("group offsets from 1"));
}

TEST_CASE(
    "A process's pair ids are its pairs' places in the one-process pair order, whatever the "
    "processes",
    "[counts]") {
  std::mt19937 random(41);
  auto below = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(random); };
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t processes = 1 + below(4), per_process = 1 + below(3), experts = 1 + below(9);
    const int64_t ranks = processes * per_process;
    // Every pair of the pass, as one process holds them: in pair order, (expert, home rank).
    std::vector<std::pair<int64_t, int64_t>> pairs(static_cast<std::size_t>(below(150)));
    for (auto& [expert, home] : pairs) expert = below(experts), home = below(ranks);
    std::sort(pairs.begin(), pairs.end());
    std::vector<int64_t> groups(static_cast<std::size_t>(ranks * experts), 0);
    for (const auto& [expert, home] : pairs)
      ++groups[static_cast<std::size_t>(home * experts + expert)];
    for (int64_t p = 0; p < processes; ++p) {
      // Process p's own pairs, in its pair order: the ones homed on its ranks, in the same order.
      std::vector<int64_t> expected;
      for (std::size_t i = 0; i < pairs.size(); ++i)
        if (pairs[i].second / per_process == p) expected.push_back(static_cast<int64_t>(i));
      const ProcessView process{p, processes, per_process};
      CHECK(pair_order_ids(groups, experts, process, torch::kCPU)
                .equal(torch::tensor(expected, torch::kInt64)));
    }
  }
}
