// Quotas spread over a plan's quota pools by score mass (Note [Quotas by score mass] in
// docs/notes.md): the arithmetic, on its own. That both plans spread alike on real processes is
// checked in test_scalable_plan.cpp.

#include <catch2/catch.hpp>

#include <numeric>
#include <random>

#include "core/pipeline/instance_table.hpp"
#include "core/pipeline/quota_pools.hpp"
#include "lrmoe/placement.hpp"

using lrmoe::kNoQuotaPool;
using lrmoe::spread_pool_quotas;
using Counts = std::vector<int64_t>;

TEST_CASE("A pool's quota goes to its experts in proportion to their score mass", "[quota]") {
  // Pool 0 holds 4 + 4 pairs of quota; its experts carry mass 3 : 1. Expert 2 is in no pool.
  CHECK(spread_pool_quotas({4, 4, 4}, {0, 0, kNoQuotaPool}, {10, 10, 10}, {3, 1, 5}) ==
        Counts{6, 2, 4});
  // No pools: the quotas as planned.
  CHECK(spread_pool_quotas({4, 4}, {kNoQuotaPool, kNoQuotaPool}, {10, 10}, {9, 1}) == Counts{4, 4});
}

TEST_CASE("An expert keeps at most its computed pairs, and what it cannot take goes to the others",
          "[quota]") {
  // Expert 0's share of 8 would be 7.2, above its 5 pairs: it keeps 5, expert 1 the 3 left.
  CHECK(spread_pool_quotas({4, 4}, {0, 0}, {5, 10}, {9, 1}) == Counts{5, 3});
  // A quota above its expert's computed pairs counts as those pairs in the pool's total.
  CHECK(spread_pool_quotas({9, 1}, {0, 0}, {2, 10}, {1, 1}) == Counts{2, 1});
  // Every expert capped: the pool keeps every computed pair and no more.
  CHECK(spread_pool_quotas({3, 3}, {0, 0}, {3, 3}, {1, 100}) == Counts{3, 3});
}

TEST_CASE("Pairs left by rounding go to the largest remainders, equal ones to the lower expert",
          "[quota]") {
  // Shares of 3 by mass 1 : 1 : 2 are 0.75, 0.75, 1.5: floors 0, 0, 1, and two pairs left.
  CHECK(spread_pool_quotas({1, 1, 1}, {0, 0, 0}, {9, 9, 9}, {1, 1, 2}) == Counts{1, 1, 1});
  // Shares of 2 by equal mass over three experts are 2/3 each: floors 0, the two pairs left to
  // experts 0 and 1.
  CHECK(spread_pool_quotas({1, 1, 0}, {0, 0, 0}, {9, 9, 9}, {5, 5, 5}) == Counts{1, 1, 0});
}

TEST_CASE("A pool without score mass keeps its quotas, and an expert without mass keeps nothing",
          "[quota]") {
  CHECK(spread_pool_quotas({2, 5}, {0, 0}, {9, 9}, {0, 0}) == Counts{2, 5});
  CHECK(spread_pool_quotas({2, 5}, {0, 0}, {9, 9}, {0, 4}) == Counts{0, 7});
}

TEST_CASE("Spread quotas never exceed a pool's quota or an expert's pairs", "[quota]") {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 500; ++trial) {
    const auto experts = static_cast<std::size_t>(1 + random() % 12);
    Counts quota(experts), pool(experts), computed(experts), mass(experts);
    for (std::size_t e = 0; e < experts; ++e) {
      computed[e] = static_cast<int64_t>(random() % 50);
      // Some quotas above their computed pairs (a plugin's, with a forward capacity).
      quota[e] = static_cast<int64_t>(random() % (computed[e] + 8));
      pool[e] = static_cast<int64_t>(random() % 4) - 1;  // kNoQuotaPool, 0, 1 or 2
      // Masses of every size, zero among them, up to the sums a large pass reaches.
      mass[e] = random() % 5 == 0 ? 0 : static_cast<int64_t>(random() >> (1 + random() % 62));
    }
    const Counts spread = spread_pool_quotas(quota, pool, computed, mass);
    INFO("trial " << trial);
    for (int64_t p = kNoQuotaPool; p < 3; ++p) {
      int64_t planned = 0, given = 0, room = 0;
      bool any_mass = false;
      for (std::size_t e = 0; e < experts; ++e)
        any_mass = any_mass || (pool[e] == p && mass[e] > 0);
      for (std::size_t e = 0; e < experts; ++e) {
        if (pool[e] != p) continue;
        // Outside every pool, or in one without mass: the quota as planned (the selection keeps
        // at most the pairs there are).
        if (p == kNoQuotaPool || !any_mass) {
          REQUIRE(spread[e] == quota[e]);
          continue;
        }
        REQUIRE(spread[e] >= 0);
        REQUIRE(spread[e] <= computed[e]);
        planned += std::min(quota[e], computed[e]);
        given += spread[e];
        if (mass[e] > 0) room += computed[e];
      }
      // A pool hands out its whole quota, unless its experts with mass cannot take it all.
      if (p != kNoQuotaPool && any_mass) REQUIRE(given == std::min(planned, room));
    }
  }
}

TEST_CASE("Score mass sums exactly: a batch split in parts sums to the whole's mass", "[quota]") {
  torch::manual_seed(3);
  const int64_t pairs = 1000, experts = 5;
  const torch::Tensor scores = torch::rand({pairs}, torch::kFloat32) * 1e-3;
  const torch::Tensor expert = torch::randint(experts, {pairs}, torch::kInt64);
  const double largest = scores.max().item<double>();
  const Counts whole = lrmoe::score_mass_units(scores, expert, experts, largest);
  Counts parts(static_cast<std::size_t>(experts), 0);
  for (const auto& [begin, size] : {std::pair{0, 301}, {301, 500}, {801, 199}}) {
    const Counts part = lrmoe::score_mass_units(scores.narrow(0, begin, size),
                                                expert.narrow(0, begin, size), experts, largest);
    for (std::size_t e = 0; e < parts.size(); ++e) parts[e] += part[e];
  }
  CHECK(parts == whole);
  // The largest score is 2^32 units; no score, no mass.
  CHECK(std::accumulate(whole.begin(), whole.end(), int64_t{0}) > (int64_t{1} << 32));
  CHECK(lrmoe::score_mass_units(scores, expert, experts, 0.0) == Counts(5, 0));
}

TEST_CASE("Quota pools must name one pool or none per expert", "[quota]") {
  CHECK_THROWS_WITH(lrmoe::check_quota_pools({0, 1}, 3, "p"),
                    "placement 'p' returned 2 quota pools for 3 experts");
  CHECK_THROWS_WITH(lrmoe::check_quota_pools({0, -2}, 2, "p"),
                    Catch::Contains("quota pool -2 for expert 1"));
  CHECK_NOTHROW(lrmoe::check_quota_pools({}, 2, "p"));
  CHECK_NOTHROW(lrmoe::check_quota_pools({kNoQuotaPool, 4}, 2, "p"));
}
