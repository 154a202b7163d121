// The histogram search for each expert's quota threshold (Note [Scalable selection]): processes'
// searches run in lockstep, their histograms summed as an all-reduce would, and the pairs they
// keep are exactly those the exact plan keeps: each expert's quota highest scores over all
// processes, ties to the earlier pair in process order.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "core/pipeline/quota_threshold_search.hpp"

using namespace lrmoe;

namespace {

struct ProcessPairs {
  std::vector<int64_t> experts;
  std::vector<float> scores;
};

// A search over one home rank's pairs of `experts` (in pair order), its process `view`'s only.
QuotaThresholdSearch search_of(const std::vector<int64_t>& experts,
                               const std::vector<float>& scores, std::vector<int64_t> quota,
                               const std::vector<int64_t>& pairs = {},
                               const ProcessView& view = {}) {
  std::vector<int64_t> offsets(quota.size() + 1, 0);
  for (const int64_t e : experts) ++offsets.at(static_cast<std::size_t>(e) + 1);
  std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
  return QuotaThresholdSearch(offsets, view, torch::tensor(scores), std::move(quota), pairs);
}

// What the histogram search agrees on, each process one home rank: every process's kept pairs,
// and the kept pairs per (process, expert) as every process computes them.
struct Searched {
  std::vector<std::vector<bool>> kept;
  std::vector<int64_t> groups;
};

// The kept pairs' indices ([k] int64) as a mask over n pairs.
std::vector<bool> as_mask(const torch::Tensor& kept, std::size_t n) {
  std::vector<bool> mask(n, false);
  for (int64_t i = 0; i < kept.numel(); ++i)
    mask.at(static_cast<std::size_t>(kept[i].item<int64_t>())) = true;
  return mask;
}

// `pairs`: each expert's pairs over the processes, or empty, as QuotaThresholdSearch takes them.
Searched searched(const std::vector<ProcessPairs>& processes, const std::vector<int64_t>& quota,
                  const std::vector<int64_t>& pairs = {}) {
  const auto ranks = static_cast<int64_t>(processes.size());
  std::vector<QuotaThresholdSearch> searches;
  for (int64_t p = 0; p < ranks; ++p) {
    const ProcessPairs& mine = processes[static_cast<std::size_t>(p)];
    searches.push_back(
        search_of(mine.experts, mine.scores, quota, pairs, ProcessView{p, ranks, 1}));
  }
  while (!searches.front().done()) {
    torch::Tensor sum;
    for (QuotaThresholdSearch& s : searches) {
      const torch::Tensor local = s.local_histogram();
      sum = sum.defined() ? sum + local : local;
    }
    for (QuotaThresholdSearch& s : searches) s.narrow(sum);
  }
  torch::Tensor groups;
  for (QuotaThresholdSearch& search : searches) {
    const torch::Tensor local = search.local_groups();
    groups = groups.defined() ? groups + local : local;
  }
  Searched result;
  for (int64_t p = 0; p < ranks; ++p) {
    result.kept.push_back(as_mask(searches[static_cast<std::size_t>(p)].kept(groups),
                                  processes[static_cast<std::size_t>(p)].experts.size()));
  }
  result.groups = searches.front().kept_groups(groups);
  return result;
}

// Kept pairs per (process, expert) of `kept`.
std::vector<int64_t> kept_per_group(const std::vector<ProcessPairs>& processes,
                                    const std::vector<std::vector<bool>>& kept,
                                    int64_t num_experts) {
  std::vector<int64_t> groups(processes.size() * static_cast<std::size_t>(num_experts), 0);
  for (std::size_t p = 0; p < processes.size(); ++p)
    for (std::size_t i = 0; i < kept[p].size(); ++i)
      if (kept[p][i])
        ++groups[p * static_cast<std::size_t>(num_experts) +
                 static_cast<std::size_t>(processes[p].experts[i])];
  return groups;
}

// The exact plan's choice: all pairs in process order, each expert's quota highest, ties to the
// earlier pair.
std::vector<std::vector<bool>> exact(const std::vector<ProcessPairs>& processes,
                                     const std::vector<int64_t>& quota) {
  struct Pair {
    std::size_t process, index;
    int64_t expert;
    float score;
  };
  std::vector<Pair> all;
  for (std::size_t p = 0; p < processes.size(); ++p) {
    for (std::size_t i = 0; i < processes[p].experts.size(); ++i)
      all.push_back({p, i, processes[p].experts[i], processes[p].scores[i]});
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Pair& a, const Pair& b) { return a.score > b.score; });
  std::vector<std::vector<bool>> kept;
  for (const ProcessPairs& p : processes) kept.emplace_back(p.experts.size(), false);
  std::vector<int64_t> taken(quota.size(), 0);
  for (const Pair& pair : all) {
    const auto e = static_cast<std::size_t>(pair.expert);
    if (taken[e] < quota[e]) {
      kept[pair.process][pair.index] = true;
      ++taken[e];
    }
  }
  return kept;
}

}  // namespace

TEST_CASE("score keys order floats as the floats order, with -0 and +0 one key", "[selection]") {
  const std::vector<float> ascending{-std::numeric_limits<float>::infinity(),
                                     -1e30F,
                                     -2.5F,
                                     -1e-40F,  // subnormal
                                     0.0F,
                                     1e-40F,
                                     1.0F,
                                     1.0000001F,
                                     3e38F,
                                     std::numeric_limits<float>::infinity()};
  for (std::size_t i = 0; i + 1 < ascending.size(); ++i) {
    INFO(ascending[i] << " < " << ascending[i + 1]);
    CHECK(score_key(ascending[i]) < score_key(ascending[i + 1]));
  }
  CHECK(score_key(-0.0F) == score_key(0.0F));
}

TEST_CASE("the histogram search keeps exactly the exact plan's pairs over many processes",
          "[selection]") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t experts = 1 + static_cast<int64_t>(rng() % 6);
    const std::size_t process_count = 1 + rng() % 5;
    // Scores from a small set in some trials, so that ties straddle processes.
    const bool tied = trial % 2 == 0;
    std::vector<ProcessPairs> processes(process_count);
    std::vector<int64_t> pairs_of(static_cast<std::size_t>(experts), 0);
    for (ProcessPairs& p : processes) {
      const std::size_t n = rng() % 40;
      for (std::size_t i = 0; i < n; ++i) {
        const auto e = static_cast<int64_t>(rng() % static_cast<unsigned>(experts));
        p.experts.push_back(e);
        ++pairs_of[static_cast<std::size_t>(e)];
        const float normal = std::normal_distribution<float>(0.0F, 3.0F)(rng);
        p.scores.push_back(tied ? std::round(normal) : normal);
      }
      // Pair order: by expert, in arrival order within one (stable).
      std::vector<std::size_t> order(p.experts.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return p.experts[a] < p.experts[b]; });
      ProcessPairs sorted;
      for (std::size_t i : order) {
        sorted.experts.push_back(p.experts[i]);
        sorted.scores.push_back(p.scores[i]);
      }
      p = sorted;
    }
    // Quotas from none to more than the expert's pairs.
    std::vector<int64_t> quota;
    for (int64_t count : pairs_of)
      quota.push_back(static_cast<int64_t>(rng() % static_cast<unsigned>(count + 3)));
    // Every other trial tells the search each expert's pairs, which closes those kept whole.
    INFO("trial " << trial);
    const Searched search =
        searched(processes, quota, trial % 4 < 2 ? pairs_of : std::vector<int64_t>{});
    const std::vector<std::vector<bool>> expected = exact(processes, quota);
    CHECK(search.kept == expected);
    CHECK(search.groups == kept_per_group(processes, expected, experts));
  }
}

TEST_CASE("the search's counts say how many pairs are kept above and at each threshold",
          "[selection]") {
  // Expert 0: scores 5, 3, 3, 3, 1 over two processes, quota 3: one above, two of three ties.
  // Expert 1: quota 0. Expert 2: quota 9 of 1 pair.
  const std::vector<ProcessPairs> processes{{{0, 0, 1, 2}, {5.0F, 3.0F, 2.0F, 7.0F}},
                                            {{0, 0, 0}, {3.0F, 3.0F, 1.0F}}};
  const std::vector<int64_t> quota{3, 0, 9};
  const auto kept = searched(processes, quota).kept;
  CHECK(kept[0] == std::vector<bool>{true, true, false, true});
  CHECK(kept[1] == std::vector<bool>{true, false, false});

  QuotaThresholdSearch search = search_of({0, 0, 0, 0, 0}, {5.0F, 3.0F, 3.0F, 3.0F, 1.0F}, {3});
  while (!search.done()) search.narrow(search.local_histogram());
  CHECK(search.above() == std::vector<int64_t>{1});
  CHECK(search.ties_kept() == std::vector<int64_t>{2});
  const torch::Tensor groups = search.local_groups();
  CHECK(groups[0].sum().item<int64_t>() == 1);  // above
  CHECK(groups[1].sum().item<int64_t>() == 3);  // at
  CHECK(search.kept_groups(groups) == std::vector<int64_t>{3});
}

TEST_CASE("an expert closes once its threshold's bin is kept whole or not at all", "[selection]") {
  // Expert 0: 4 and 1 differ in their high byte, and a quota of 1 keeps that byte's bin whole.
  // Expert 1: three equal scores, a quota of 2: its bin is split to the last byte. Expert 2: a
  // quota of 0 keeps nothing, and expert 3 a quota of its two pairs keeps both, whatever the
  // bytes: neither needs a round, the second because the search is told its pairs.
  const std::vector<int64_t> experts{0, 0, 1, 1, 1, 2, 3, 3};
  const std::vector<float> scores{4.0F, 1.0F, 3.0F, 3.0F, 3.0F, 2.0F, 5.0F, 6.0F};
  QuotaThresholdSearch search = search_of(experts, scores, {1, 2, 0, 2}, {2, 3, 1, 2});
  while (!search.done()) search.narrow(search.local_histogram());
  CHECK(search.rounds() == std::vector<int64_t>{2, 1, 1, 1});
  const torch::Tensor groups = search.local_groups();
  CHECK(search.kept_groups(groups) == std::vector<int64_t>{1, 2, 0, 2});
  CHECK(as_mask(search.kept(groups), 8) ==
        std::vector<bool>{true, false, true, true, false, false, true, true});
  // kept() keeps the candidates local_groups() laid out, in place: once.
  CHECK_THROWS_AS(search.kept(groups), std::logic_error);
  // Not told the pairs, expert 3 takes a round, with the same outcome.
  QuotaThresholdSearch untold = search_of(experts, scores, {1, 2, 0, 2});
  while (!untold.done()) untold.narrow(untold.local_histogram());
  CHECK(untold.rounds() == std::vector<int64_t>{3, 1, 1, 1});
  CHECK(untold.kept_groups(untold.local_groups()) == std::vector<int64_t>{1, 2, 0, 2});
}

TEST_CASE("the search refuses group offsets that do not cover its pairs in order", "[selection]") {
  const torch::Tensor scores = torch::tensor({1.0F, 2.0F});
  for (const std::vector<int64_t>& offsets :
       {std::vector<int64_t>{0, 2, 1}, {0, 1, 3}, {1, 2, 2}, {0, 2}}) {
    CHECK_THROWS_WITH(QuotaThresholdSearch(offsets, ProcessView{}, scores, {1, 1}),
                      Catch::Contains("do not cover"));
  }
  // An expert with more pairs over the processes than an int32 bin counts.
  CHECK_THROWS_WITH(
      QuotaThresholdSearch({0, 1, 2}, ProcessView{}, scores, {1, 1}, {1, int64_t{1} << 31}),
      Catch::Contains("expert 1 has 2147483648 pairs"));
}

TEST_CASE("histograms that disagree with the quota are refused, not read past", "[selection]") {
  // One expert, two pairs in one top-byte bin, a quota of 1: it stays open after a round.
  QuotaThresholdSearch search = search_of({0, 0}, {1.0F, 1.5F}, {1});
  search.narrow(search.local_histogram());
  REQUIRE_FALSE(search.done());
  // A later round's sum holding fewer pairs than the first promised: processes out of step.
  CHECK_THROWS_WITH(search.narrow(torch::zeros({1, QuotaThresholdSearch::kBins}, torch::kInt32)),
                    Catch::Contains("disagree"));
  // One of another shape: processes that disagree on which experts are open.
  CHECK_THROWS_WITH(search.narrow(torch::zeros({2, QuotaThresholdSearch::kBins}, torch::kInt32)),
                    Catch::Contains("disagree"));
}
