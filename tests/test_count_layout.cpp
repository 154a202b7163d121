// The scalable plan's layouts (core/pipeline/count_layout.hpp): built on each process from the
// routed counts and its own pairs only, they must equal what the exact plan's build_pair_layout
// makes over every process's pairs for the same routing, field by field, since the exchanges
// and the grouped GEMMs run on them alike.

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "core/pipeline/count_layout.hpp"
#include "support/builtin_policies.hpp"

using namespace lrmoe;
using lrmoe_test::to_vector;

namespace {

struct Process {
  std::vector<int64_t> experts;  // its pairs in pair order
  std::vector<int64_t> home;
};

// A random pass: `processes` processes of `tokens` tokens, each token on top_k distinct experts,
// numbered token-major and sorted by expert stably, with home ranks as the model gives them.
std::vector<Process> random_pairs(std::mt19937& random, int64_t processes,
                                  int64_t ranks_per_process, int64_t tokens, int64_t experts,
                                  int64_t top_k) {
  std::vector<Process> all(static_cast<std::size_t>(processes));
  for (int64_t p = 0; p < processes; ++p) {
    std::vector<std::pair<int64_t, int64_t>> pairs;  // (expert, home) token-major
    for (int64_t t = 0; t < tokens; ++t) {
      std::vector<int64_t> choice(static_cast<std::size_t>(experts));
      std::iota(choice.begin(), choice.end(), 0);
      std::shuffle(choice.begin(), choice.end(), random);
      for (int64_t k = 0; k < top_k; ++k)
        pairs.emplace_back(choice[static_cast<std::size_t>(k)],
                           p * ranks_per_process + t * ranks_per_process / tokens);
    }
    std::stable_sort(pairs.begin(), pairs.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [expert, home] : pairs) {
      all[static_cast<std::size_t>(p)].experts.push_back(expert);
      all[static_cast<std::size_t>(p)].home.push_back(home);
    }
  }
  return all;
}

InstanceTable random_table(std::mt19937& random, int64_t experts, int64_t ranks) {
  auto below = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(random); };
  PlacementPlan plan;
  std::vector<int64_t> slots(static_cast<std::size_t>(ranks), 0);
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t owner = below(ranks);
    plan.instances.push_back({e, owner, slots[static_cast<std::size_t>(owner)]++, true});
    for (int64_t r = 0; r < ranks; ++r) {
      if (below(3) == 0)
        plan.instances.push_back({e, r, slots[static_cast<std::size_t>(r)]++, false});
    }
  }
  plan.quota.assign(static_cast<std::size_t>(experts), 0);
  return build_instance_table(plan, experts, ranks, 2 * experts, "random");
}

}  // namespace

TEST_CASE(
    "A layout from routed counts equals the exact layout of the same routing on every process",
    "[pipeline]") {
  std::mt19937 random(31);
  auto below = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(random); };
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t processes = 1 + below(4), ranks_per_process = 1 + below(3);
    const int64_t ranks = processes * ranks_per_process;
    const int64_t experts = 2 + below(6), top_k = 1 + below(2), tokens = below(12);
    INFO("trial " << trial << ": " << processes << " processes, " << ranks << " ranks, " << experts
                  << " experts, " << tokens << " tokens each");
    const std::vector<Process> pairs =
        random_pairs(random, processes, ranks_per_process, tokens, experts, top_k);
    const InstanceTable table = random_table(random, experts, ranks);
    const int64_t I = table.size();

    // A random count routing: each (home rank, expert) group split over the expert's instances.
    std::vector<int64_t> group(static_cast<std::size_t>(ranks * experts), 0);
    for (const Process& p : pairs)
      for (std::size_t j = 0; j < p.experts.size(); ++j)
        ++group[static_cast<std::size_t>(p.home[j] * experts + p.experts[j])];
    std::vector<int64_t> routed(static_cast<std::size_t>(ranks * I), 0);
    for (int64_t h = 0; h < ranks; ++h) {
      for (int64_t e = 0; e < experts; ++e) {
        const InstanceList instances = table.instances_of(e);
        for (int64_t n = group[static_cast<std::size_t>(h * experts + e)]; n > 0; --n)
          ++routed[static_cast<std::size_t>(h * I + instances[static_cast<std::size_t>(below(
                                                        static_cast<int64_t>(instances.size())))])];
      }
    }

    // Each process's layout from the counts, then the exact layout over all pairs with the
    // instances it gave them, in pair order: by expert, then process, then the process's order.
    std::vector<PairLayout> counted;
    for (int64_t p = 0; p < processes; ++p) {
      const ProcessView view{p, processes, ranks_per_process};
      counted.push_back(count_pair_layout(
          routed, static_cast<int64_t>(pairs[static_cast<std::size_t>(p)].experts.size()),
          torch::kCPU, table, ranks, view, /*with_instances=*/true));
    }
    std::vector<int64_t> all_instance, all_home;
    std::vector<std::vector<int64_t>> global_index(static_cast<std::size_t>(processes));
    for (int64_t p = 0; p < processes; ++p)
      global_index[static_cast<std::size_t>(p)].resize(
          pairs[static_cast<std::size_t>(p)].experts.size());
    for (int64_t e = 0; e < experts; ++e) {
      for (int64_t p = 0; p < processes; ++p) {
        const Process& mine = pairs[static_cast<std::size_t>(p)];
        const std::vector<int64_t> instance =
            to_vector(counted[static_cast<std::size_t>(p)].instance);
        for (std::size_t j = 0; j < mine.experts.size(); ++j) {
          if (mine.experts[j] != e) continue;
          CHECK(table.instances[static_cast<std::size_t>(instance[j])].expert == e);
          global_index[static_cast<std::size_t>(p)][j] = static_cast<int64_t>(all_instance.size());
          all_instance.push_back(instance[j]);
          all_home.push_back(mine.home[j]);
        }
      }
    }
    for (int64_t p = 0; p < processes; ++p) {
      INFO("process " << p);
      const ProcessView view{p, processes, ranks_per_process};
      const PairLayout exact =
          build_pair_layout(torch::tensor(all_instance, torch::kInt64),
                            torch::tensor(all_home, torch::kInt64), table, ranks, view);
      const PairLayout& mine = counted[static_cast<std::size_t>(p)];
      CHECK(mine.instance_offsets == exact.instance_offsets);
      CHECK(mine.matrix == exact.matrix);
      CHECK(mine.load == exact.load);
      const ProcessSlice& a = mine.local;
      const ProcessSlice& b = exact.local;
      CHECK(a.home_pairs.numel() == b.home_pairs.numel());
      CHECK(to_vector(a.send_rows) == to_vector(b.send_rows));
      CHECK(a.send_counts == b.send_counts);
      CHECK(a.recv_counts == b.recv_counts);
      CHECK(a.first_row == b.first_row);
      CHECK(a.instance_offsets == b.instance_offsets);
      REQUIRE(a.arrival.defined() == b.arrival.defined());
      if (a.arrival.defined()) CHECK(to_vector(a.arrival) == to_vector(b.arrival));

      // Each pair's row in the global destination order.
      const std::vector<int64_t> exact_order = to_vector(exact.order);
      std::vector<int64_t> exact_row(exact_order.size());
      for (std::size_t r = 0; r < exact_order.size(); ++r)
        exact_row[static_cast<std::size_t>(exact_order[r])] = static_cast<int64_t>(r);
      std::vector<int64_t> expected;
      for (const int64_t g : global_index[static_cast<std::size_t>(p)])
        expected.push_back(exact_row[static_cast<std::size_t>(g)]);
      // The runs cover the pairs in pair order, each of one home rank and one instance, its
      // pairs on consecutive destination rows from its first.
      const Process& own = pairs[static_cast<std::size_t>(p)];
      const std::vector<int64_t> instance = to_vector(mine.instance);
      std::vector<int64_t> row;
      for (const PairRun& run : mine.runs) {
        CHECK(run.first_pair == static_cast<int64_t>(row.size()));
        for (int64_t j = run.first_pair; j < run.first_pair + run.pairs; ++j) {
          CHECK(own.home[static_cast<std::size_t>(j)] == run.home_rank);
          CHECK(instance[static_cast<std::size_t>(j)] == run.instance);
          row.push_back(run.first_row + j - run.first_pair);
        }
      }
      CHECK(row == expected);
      // Without the instances, the same layout but them.
      const PairLayout bare = count_pair_layout(routed, static_cast<int64_t>(own.experts.size()),
                                                torch::kCPU, table, ranks, view,
                                                /*with_instances=*/false);
      CHECK_FALSE(bare.instance.defined());
      CHECK(to_vector(bare.order) == to_vector(mine.order));
      CHECK(bare.local.arrival.defined() == mine.local.arrival.defined());
      if (bare.local.arrival.defined())
        CHECK(to_vector(bare.local.arrival) == to_vector(mine.local.arrival));
    }
  }
}

TEST_CASE("A layout from routed counts that miss the process's pairs is refused", "[pipeline]") {
  std::mt19937 random(3);
  const InstanceTable table = random_table(random, 3, 2);
  std::vector<int64_t> routed(static_cast<std::size_t>(2 * table.size()), 0);
  routed[0] = 1;  // one pair of rank 0, but the process has two
  CHECK_THROWS_AS(count_pair_layout(routed, 2, torch::kCPU, table, 2, ProcessView{0, 1, 2}, false),
                  PlanError);
}
