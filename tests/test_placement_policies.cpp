// The built-in placement plugins: SYMI and fixed ownership against hand-worked examples, and the
// LRMoE planner against hand-worked examples and its invariants over random requests.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "lrmoe/memory_model.hpp"
#include "support/builtin_policies.hpp"

using lrmoe::ExpertInstance;
using lrmoe::PlacementPlan;
using lrmoe::PlacementRequest;
using lrmoe_test::load;
using lrmoe_test::sum;

namespace {

PlacementRequest placement_request(int64_t ranks, int64_t slots_per_rank,
                                   std::vector<int64_t> counts) {
  PlacementRequest request;
  request.step = 1;
  request.num_experts = static_cast<int64_t>(counts.size());
  request.ranks = ranks;
  request.slots_per_rank = slots_per_rank;
  request.top_k = 1;
  request.tokens = sum(counts);
  request.counts = std::move(counts);
  request.budget_bytes = int64_t{1} << 40;
  request.memory = {500, 10, 0, 20};
  return request;
}

// The rules every plan follows; returns the instances per expert.
std::vector<int64_t> check_valid_plan(const PlacementRequest& request, const PlacementPlan& plan) {
  std::vector<int64_t> instances(static_cast<size_t>(request.num_experts), 0);
  std::vector<int64_t> owners(static_cast<size_t>(request.num_experts), 0);
  std::set<std::pair<int64_t, int64_t>> used;
  for (const ExpertInstance& instance : plan.instances) {
    REQUIRE(instance.expert >= 0);
    REQUIRE(instance.expert < request.num_experts);
    REQUIRE(instance.rank >= 0);
    REQUIRE(instance.rank < request.ranks);
    REQUIRE(instance.slot >= 0);
    REQUIRE(instance.slot < request.slots_per_rank);
    REQUIRE(used.insert({instance.rank, instance.slot}).second);
    ++instances[static_cast<size_t>(instance.expert)];
    owners[static_cast<size_t>(instance.expert)] += instance.owner ? 1 : 0;
  }
  for (int64_t e = 0; e < request.num_experts; ++e) {
    REQUIRE(instances[static_cast<size_t>(e)] >= 1);
    REQUIRE(owners[static_cast<size_t>(e)] == 1);
  }
  REQUIRE(plan.quota.size() == static_cast<size_t>(request.num_experts));
  return instances;
}

// {expert, rank, slot, owner ? 1 : 0} of every instance, in plan order.
std::vector<std::vector<int64_t>> layout(const PlacementPlan& plan) {
  std::vector<std::vector<int64_t>> result;
  for (const ExpertInstance& instance : plan.instances) {
    result.push_back({instance.expert, instance.rank, instance.slot, instance.owner ? 1 : 0});
  }
  return result;
}

// Per rank, the memory model of lrmoe/memory_model.hpp before routing: an expert's forward pairs
// and kept pairs count as split evenly over its instances.
std::vector<double> rank_memory(const PlacementRequest& request, const PlacementPlan& plan) {
  std::vector<int64_t> copies(static_cast<size_t>(request.num_experts), 0);
  for (const ExpertInstance& instance : plan.instances) {
    ++copies[static_cast<size_t>(instance.expert)];
  }
  std::vector<lrmoe::LayerHolding> holdings(static_cast<size_t>(request.ranks));
  for (const ExpertInstance& instance : plan.instances) {
    const auto e = static_cast<size_t>(instance.expert);
    int64_t forward = request.counts[e];
    if (!plan.forward_capacity.empty()) {
      forward = std::min(forward, plan.forward_capacity[e]);
    }
    const int64_t kept = std::min(request.counts[e], plan.quota[e]);
    lrmoe::LayerHolding& h = holdings[static_cast<size_t>(instance.rank)];
    ++(instance.owner ? h.owned : h.replicas);
    h.forward_pairs += static_cast<double>(forward) / static_cast<double>(copies[e]);
    h.backward_pairs += static_cast<double>(kept) / static_cast<double>(copies[e]);
  }
  std::vector<double> memory;
  for (const lrmoe::LayerHolding& h : holdings)
    memory.push_back(lrmoe::layer_peak_bytes(request.memory, h));
  return memory;
}

// E = 4 on R = 2 with S = 3, n = [60, 20, 10, 10], expert parameters 10 bytes, forward pairs 1,
// backward pairs 10, under `budget` bytes a rank: the owners' forward alone does not fit 100.
PlacementRequest forward_bound_request(int64_t budget) {
  PlacementRequest request = placement_request(2, 3, {60, 20, 10, 10});
  request.memory = {10, 1, 0, 10};
  request.budget_bytes = budget;
  return request;
}

// LRMoE with no balancing replicas and no headroom: only the replicas and caps the budget forces.
std::shared_ptr<lrmoe::PlacementPolicy> forced_lrmoe(bool forward_fallback = true) {
  return load<lrmoe::PlacementPolicy>(
      "lrmoe",
      {{"max_replicas", int64_t{0}}, {"headroom", 0.0}, {"forward_fallback", forward_fallback}});
}

// Per rank, the sum over its instances of n_e / cnt_e.
std::vector<double> forward_load(const PlacementRequest& request, const PlacementPlan& plan) {
  std::vector<int64_t> copies(static_cast<size_t>(request.num_experts), 0);
  for (const ExpertInstance& instance : plan.instances) {
    ++copies[static_cast<size_t>(instance.expert)];
  }
  std::vector<double> load(static_cast<size_t>(request.ranks), 0.0);
  for (const ExpertInstance& instance : plan.instances) {
    const auto e = static_cast<size_t>(instance.expert);
    load[static_cast<size_t>(instance.rank)] +=
        static_cast<double>(request.counts[e]) / static_cast<double>(copies[e]);
  }
  return load;
}

}  // namespace

TEST_CASE("symi removes a replica from the expert furthest above its goal", "[policies]") {
  // R = 2, S = 3: 6 slots. Previous counts n = [0, 0, 7, 13], sum 20.
  // goal = n / 20 * 6 = [0, 0, 2.1, 3.9]; cnt = floor(max(goal, 1)) = [1, 1, 2, 3], sum 7 > 6.
  // Among cnt > 1: cnt - goal = -0.1 (expert 2), -0.9 (expert 3): remove from expert 2.
  // cnt = [1, 1, 1, 3]. Entries 0..5 (rank = i / 3, slot = i % 3): e0 e1 e2 | e3 e3 e3.
  PlacementRequest request = placement_request(2, 3, {5, 5, 5, 5});
  request.history = {{20, 0, 0, 0}, {0, 0, 7, 13}};  // only the most recent one counts
  const PlacementPlan plan = load<lrmoe::PlacementPolicy>("symi")->plan(request);
  check_valid_plan(request, plan);
  using I = std::vector<int64_t>;
  CHECK(layout(plan) == std::vector<I>{I{0, 0, 0, 1}, I{1, 0, 1, 1}, I{2, 0, 2, 1}, I{3, 1, 0, 1},
                                       I{3, 1, 1, 0}, I{3, 1, 2, 0}});
  // SYMI keeps every pair in backward, and plans without this pass's counts.
  CHECK(plan.quota == std::vector<int64_t>(4, lrmoe::kKeepEveryPair));
  CHECK(load<lrmoe::PlacementPolicy>("symi")->plans_from() ==
        lrmoe::PlanInformation::EarlierPasses);
}

TEST_CASE("symi adds replicas to the experts furthest below their goal", "[policies]") {
  SECTION("one addition, tie to the lower expert") {
    // R = 2, S = 2: 4 slots. n = [5, 5, 2], sum 12. goal = [1.667, 1.667, 0.667];
    // cnt = [1, 1, 1], sum 3 < 4. cnt - goal = [-0.667, -0.667, 0.333]: tie, expert 0 gets one.
    // cnt = [2, 1, 1]. Entries: e0 e0 | e1 e2.
    PlacementRequest request = placement_request(2, 2, {1, 1, 1});
    request.history = {{5, 5, 2}};
    const PlacementPlan plan = load<lrmoe::PlacementPolicy>("symi")->plan(request);
    check_valid_plan(request, plan);
    using I = std::vector<int64_t>;
    CHECK(layout(plan) ==
          std::vector<I>{I{0, 0, 0, 1}, I{0, 0, 1, 0}, I{1, 1, 0, 1}, I{2, 1, 1, 1}});
  }
  SECTION("two additions") {
    // R = 3, S = 2: 6 slots. n = [3, 3, 4], sum 10. goal = [1.8, 1.8, 2.4]; cnt = [1, 1, 2], sum 4.
    // cnt - goal = [-0.8, -0.8, -0.4]: expert 0 -> cnt [2, 1, 2], cnt - goal = [0.2, -0.8, -0.4]:
    // expert 1 -> cnt [2, 2, 2]. Entries: e0 e0 | e1 e1 | e2 e2.
    PlacementRequest request = placement_request(3, 2, {1, 1, 1});
    request.history = {{3, 3, 4}};
    const PlacementPlan plan = load<lrmoe::PlacementPolicy>("symi")->plan(request);
    CHECK(check_valid_plan(request, plan) == std::vector<int64_t>{2, 2, 2});
    for (const ExpertInstance& instance : plan.instances) {
      CHECK(instance.rank == instance.expert);  // expert e fills rank e here
    }
  }
}

TEST_CASE("symi's first pass treats every expert as equally popular, slot-major", "[policies]") {
  // No history: n = [1, 1, 1, 1]. R = 2, S = 3: goal = 1.5 each; cnt = [1, 1, 1, 1], sum 4 < 6.
  // All cnt - goal = -0.5: expert 0 gets one (0.5), then experts 1..3 tie at -0.5: expert 1.
  // cnt = [2, 2, 1, 1]. Entries 0..5: e0 e0 e1 | e1 e2 e3, so expert 1's owner is rank 0 slot 2
  // and its replica rank 1 slot 0.
  const PlacementRequest request = placement_request(2, 3, {30, 0, 0, 9});
  const PlacementPlan plan = load<lrmoe::PlacementPolicy>("symi")->plan(request);
  check_valid_plan(request, plan);
  using I = std::vector<int64_t>;
  CHECK(layout(plan) == std::vector<I>{I{0, 0, 0, 1}, I{0, 0, 1, 0}, I{1, 0, 2, 1}, I{1, 1, 0, 0},
                                       I{2, 1, 1, 1}, I{3, 1, 2, 1}});
}

TEST_CASE("symi's forward capacity is slot capacity times replicas", "[policies]") {
  // First pass, R = 2, S = 3: cnt = [2, 2, 1, 1] (see above). This pass: 33 pairs over 6 slots.
  const PlacementRequest request = placement_request(2, 3, {10, 3, 0, 20});
  // capacity_factor 1 (default): slot capacity = ceil(33 / 6) = ceil(5.5) = 6.
  CHECK(load<lrmoe::PlacementPolicy>("symi")->plan(request).forward_capacity ==
        std::vector<int64_t>{12, 12, 6, 6});
  // 1.25: ceil(1.25 * 33 / 6) = ceil(6.875) = 7.
  CHECK(load<lrmoe::PlacementPolicy>("symi", {{"capacity_factor", 1.25}})
            ->plan(request)
            .forward_capacity == std::vector<int64_t>{14, 14, 7, 7});
  CHECK(load<lrmoe::PlacementPolicy>("symi", {{"capacity_factor", 0.0}})
            ->plan(request)
            .forward_capacity.empty());
}

TEST_CASE("symi drops the pairs past its capacity at random unless told to drop lowest gates",
          "[policies]") {
  const PlacementRequest request = placement_request(2, 3, {10, 3, 0, 20});
  CHECK(load<lrmoe::PlacementPolicy>("symi")->plan(request).forward_drop ==
        lrmoe::ForwardDrop::Random);
  CHECK(load<lrmoe::PlacementPolicy>("symi", {{"drop", std::string("lowest_gate")}})
            ->plan(request)
            .forward_drop == lrmoe::ForwardDrop::LowestGate);
  CHECK_THROWS_AS(load<lrmoe::PlacementPolicy>("symi", {{"drop", std::string("position")}}),
                  lrmoe::PluginError);
}

TEST_CASE("symi with fit_budget lowers its slot capacity to the largest that fits every rank",
          "[policies]") {
  // As above: cnt = [2, 2, 1, 1], slot capacity 6. Rank 0 holds e0, a replica of e0 and e1; rank
  // 1 a replica of e1, e2 and e3: 2 owned and 1 replica each. With expert bytes 50 and pair bytes
  // 1 forward and 10 backward, a rank computing and keeping 3c pairs peaks at
  // 2 * 2 * 50 + 50 + max(3c, 10 * 3c + 50) = 300 + 30c: a budget of 450 holds c = 5.
  PlacementRequest request = placement_request(2, 3, {10, 3, 0, 20});
  request.memory = {50, 1, 0, 10};
  request.budget_bytes = 450;
  // Every slot in use (slots = "all"), so that only the capacity can give.
  const auto fitted =
      load<lrmoe::PlacementPolicy>("symi", {{"fit_budget", true}, {"slots", std::string("all")}});
  const PlacementPlan plan = fitted->plan(request);
  CHECK(plan.forward_capacity == std::vector<int64_t>{10, 10, 5, 5});
  // The published capacity when it fits, and the plan unchanged without fit_budget.
  request.budget_bytes = 480;
  CHECK(fitted->plan(request).forward_capacity == std::vector<int64_t>{12, 12, 6, 6});
  request.budget_bytes = 450;
  CHECK(load<lrmoe::PlacementPolicy>("symi", {{"slots", std::string("all")}})
            ->plan(request)
            .forward_capacity == std::vector<int64_t>{12, 12, 6, 6});
  // Nothing fits: capacity 0, and the runner reports the numbers.
  request.budget_bytes = 100;
  CHECK(fitted->plan(request).forward_capacity == std::vector<int64_t>{0, 0, 0, 0});
}

TEST_CASE("symi uses the most slots per rank that fit the budget at its capacity factor",
          "[policies]") {
  // As above, budget 450: with 3 slots a rank peaks at 480. With 2 slots (the fewest: 4 experts
  // on 2 ranks) cnt = [1, 1, 1, 1], slot capacity ceil(33 / 4) = 9, and a rank holds 2 owned
  // experts and 18 pairs: 2 * 2 * 50 + max(18, 10 * 18) = 380, which fits.
  PlacementRequest request = placement_request(2, 3, {10, 3, 0, 20});
  request.memory = {50, 1, 0, 10};
  request.budget_bytes = 450;
  const auto symi = load<lrmoe::PlacementPolicy>("symi");
  const PlacementPlan plan = symi->plan(request);
  check_valid_plan(request, plan);
  using I = std::vector<int64_t>;
  CHECK(layout(plan) == std::vector<I>{I{0, 0, 0, 1}, I{1, 0, 1, 1}, I{2, 1, 0, 1}, I{3, 1, 1, 1}});
  CHECK(plan.forward_capacity == std::vector<int64_t>{9, 9, 9, 9});
  for (const double bytes : rank_memory(request, plan)) CHECK(bytes <= 450);
  // Room for all 3: all 3.
  request.budget_bytes = 480;
  CHECK(symi->plan(request).instances.size() == 6);
  // Room for none: the fewest, and the runner reports the numbers.
  request.budget_bytes = 100;
  CHECK(symi->plan(request).instances.size() == 4);
}

TEST_CASE("symi's distinct_ranks layout puts each expert's instances on different ranks",
          "[policies]") {
  // R = 2, S = 3, previous counts [0, 0, 7, 13]: goal [0, 0, 2.1, 3.9], at most R = 2 each:
  // cnt = [1, 1, 2, 2], all 6 slots. In decreasing count (ties by index) each instance takes the
  // rank with the fewest used slots that lacks the expert: e2 on ranks 0 and 1, e3 on 0 and 1,
  // then e0 on rank 0 and e1 on rank 1. The contiguous layout puts e3's three on rank 1.
  PlacementRequest request = placement_request(2, 3, {5, 5, 5, 5});
  request.history = {{0, 0, 7, 13}};
  const PlacementPlan plan =
      load<lrmoe::PlacementPolicy>("symi", {{"layout", std::string("distinct_ranks")}})
          ->plan(request);
  check_valid_plan(request, plan);
  using I = std::vector<int64_t>;
  CHECK(layout(plan) == std::vector<I>{I{2, 0, 0, 1}, I{2, 1, 0, 0}, I{3, 0, 1, 1}, I{3, 1, 1, 0},
                                       I{0, 0, 2, 1}, I{1, 1, 2, 1}});
  CHECK(plan.forward_capacity == std::vector<int64_t>{4, 4, 8, 8});  // ceil(20 / 6) = 4 a slot
}

TEST_CASE("symi's shared_copy variant lets co-located slots share one copy and fit more slots",
          "[policies]") {
  // E = 2, R = 2, S = 3, equal popularity: cnt = [3, 3], e0 e0 e0 | e1 e1 e1, each rank one
  // owner and two co-located instances; 20 pairs, slot capacity ceil(20 / 6) = 4, 12 a rank.
  // Own copies: 2 * 50 + 2 * 50 + (10 * 12 + 2 * 50) = 420; shared: 2 * 50 + 10 * 12 = 220.
  // With 2 slots (capacity 5, 10 pairs a rank) own copies peak at 100 + 50 + 150 = 300.
  PlacementRequest request = placement_request(2, 3, {10, 10});
  request.history = {{1, 1}};
  request.memory = {50, 1, 0, 10};
  request.budget_bytes = 300;
  const PlacementPlan shared =
      load<lrmoe::PlacementPolicy>("symi", {{"co_located", std::string("shared_copy")}})
          ->plan(request);
  CHECK(shared.co_located_share_copy);
  CHECK(shared.instances.size() == 6);
  const PlacementPlan own = load<lrmoe::PlacementPolicy>("symi")->plan(request);
  CHECK_FALSE(own.co_located_share_copy);
  CHECK(own.instances.size() == 4);
}

TEST_CASE("each built-in placement says what information its plan used", "[policies]") {
  PlacementRequest request = placement_request(2, 3, {10, 3, 0, 20});
  const auto symi = load<lrmoe::PlacementPolicy>("symi");
  CHECK(symi->plan(request).information == lrmoe::PlanInformation::WarmUp);
  request.history = {{1, 2, 3, 4}};
  CHECK(symi->plan(request).information == lrmoe::PlanInformation::EarlierPasses);
  CHECK(load<lrmoe::PlacementPolicy>("fixed_ownership")->plan(request).information ==
        lrmoe::PlanInformation::NoCounts);
  CHECK(load<lrmoe::PlacementPolicy>("lrmoe")->plan(request).information ==
        lrmoe::PlanInformation::ThisPass);
  // Declared before any call: the runner plans ahead the two that do not read this pass's counts.
  CHECK(symi->plans_from() == lrmoe::PlanInformation::EarlierPasses);
  CHECK(load<lrmoe::PlacementPolicy>("lrmoe")->plans_from() == lrmoe::PlanInformation::ThisPass);
}

TEST_CASE("fixed_ownership places expert e on rank e / ceil(E/R) with the Megatron capacity",
          "[policies]") {
  // E = 10, R = 4: ceil(10 / 4) = 3 experts per rank; expert 9 alone on rank 3.
  PlacementRequest request = placement_request(4, 3, {9, 8, 7, 6, 5, 4, 3, 2, 1, 5});
  request.top_k = 2;
  request.tokens = 25;  // 2 * 25 = 50 pairs
  const PlacementPlan dropless = load<lrmoe::PlacementPolicy>("fixed_ownership")->plan(request);
  CHECK(check_valid_plan(request, dropless) == std::vector<int64_t>(10, 1));
  for (const ExpertInstance& instance : dropless.instances) {
    CHECK(instance.rank == instance.expert / 3);
    CHECK(instance.slot == instance.expert % 3);
  }
  CHECK(dropless.quota == std::vector<int64_t>(10, lrmoe::kKeepEveryPair));
  CHECK(load<lrmoe::PlacementPolicy>("fixed_ownership")->plans_from() ==
        lrmoe::PlanInformation::NoCounts);
  CHECK(dropless.forward_capacity.empty());  // capacity_factor 0 (default): dropless
  // C = ceil(k * T / E * capacity_factor) = ceil(2 * 25 / 10 * 1.5) = 7.5 -> 8.
  const PlacementPlan capped =
      load<lrmoe::PlacementPolicy>("fixed_ownership", {{"capacity_factor", 1.5}})->plan(request);
  CHECK(capped.forward_capacity == std::vector<int64_t>(10, 8));
  CHECK(load<lrmoe::PlacementPolicy>("fixed_ownership", {{"capacity_factor", 2.0}})
            ->plan(request)
            .forward_capacity == std::vector<int64_t>(10, 10));
  // A capacity in pairs overrides the factor; 0 drops every pair (the routed experts removed).
  for (const int64_t capacity : {int64_t{0}, int64_t{3}}) {
    CHECK(load<lrmoe::PlacementPolicy>("fixed_ownership",
                                       {{"capacity_factor", 1.5}, {"capacity", capacity}})
              ->plan(request)
              .forward_capacity == std::vector<int64_t>(10, capacity));
  }
}

TEST_CASE("lrmoe replicates the hot expert and water-fills quotas within the budget",
          "[policies]") {
  // E = 4, R = 2, S = 3: owners e0 e1 on rank 0, e2 e3 on rank 1. n = [60, 20, 10, 10].
  // F = [80, 20]. Replica of e0 (the hottest on rank 0) on rank 1: max(20 + 30, 80 - 60 + 30) = 50
  // < 80, so it is added; cnt = [2, 1, 1, 1], F = [50, 50]. max_replicas = 1 stops there.
  PlacementRequest request = placement_request(2, 3, {60, 20, 10, 10});
  request.memory = {50, 1, 0, 10};  // expert parameters 50 (and as much gradient), pairs 1 and 10
  const auto planner = load<lrmoe::PlacementPolicy>(
      "lrmoe", {{"max_replicas", int64_t{1}}, {"keep_fraction", 0.5}, {"headroom", 0.0}});

  SECTION("generous budget: quotas from K alone") {
    // K = ceil(0.5 * 100) = 50. q = [min(60, floor(2 tau)), min(20, floor(tau)), min(10,
    // floor(tau)) x 2]: tau = 10 gives [20, 10, 10, 10] = 50; at tau = 10.5 q0 = 21 and the sum 51
    // > K.
    const PlacementPlan plan = planner->plan(request);
    CHECK(check_valid_plan(request, plan) == std::vector<int64_t>{2, 1, 1, 1});
    CHECK(plan.quota == std::vector<int64_t>{20, 10, 10, 10});
    CHECK(plan.forward_capacity.empty());
    using I = std::vector<int64_t>;
    CHECK(layout(plan) == std::vector<I>{I{0, 0, 0, 1}, I{1, 0, 1, 1}, I{2, 1, 0, 1}, I{3, 1, 1, 1},
                                         I{0, 1, 2, 0}});
  }
  SECTION("tight budget: tau lowered until every rank fits") {
    // Rank 1 (owners e2 e3, replica of e0, F = 50): resident 2 * 2 * 50 + replica 50 + max(forward
    // 50, backward 10 * (q0 / 2 + q2 + q3) + replica gradient 50) <= 550 needs q0 / 2 + q2 + q3 <=
    // 25; rank 0 (owners e0 e1): 200 + max(50, 10 * (q0 / 2 + q1)) <= 550 needs q0 / 2 + q1 <= 35.
    // tau = 8.5: q = [17, 8, 8, 8], 8.5 + 16 = 24.5 fits; tau = 9: q = [18, 9, 9, 9], 9 + 18 = 27
    // does not.
    request.budget_bytes = 550;
    const PlacementPlan plan = planner->plan(request);
    check_valid_plan(request, plan);
    CHECK(plan.quota == std::vector<int64_t>{17, 8, 8, 8});
    for (const double memory : rank_memory(request, plan)) {
      CHECK(memory <= 550);
    }
  }
  SECTION("impossible budget: zero quotas and no replicas") {
    // not even rank 0's two owned experts (parameters and gradients: 200) fit
    request.budget_bytes = 150;
    const PlacementPlan plan = planner->plan(request);
    CHECK(check_valid_plan(request, plan) == std::vector<int64_t>{1, 1, 1, 1});
    CHECK(plan.quota == std::vector<int64_t>{0, 0, 0, 0});
  }
  SECTION("keep_fraction 1 keeps every pair when memory allows") {
    CHECK(load<lrmoe::PlacementPolicy>("lrmoe", {{"keep_fraction", 1.0}})->plan(request).quota ==
          request.counts);
  }
}

TEST_CASE("lrmoe by score mass pools each rank's unreplicated experts, and plans the same quotas",
          "[policies]") {
  // The request of the case above: e0 (owned by rank 0) gets a replica on rank 1, so it keeps its
  // quota; e1 shares rank 0's pool with nothing else, e2 and e3 share rank 1's.
  PlacementRequest request = placement_request(2, 3, {60, 20, 10, 10});
  request.memory = {50, 1, 0, 10};
  request.budget_bytes = 550;
  const std::map<std::string, lrmoe::ParameterValue> common{
      {"max_replicas", int64_t{1}}, {"keep_fraction", 0.5}, {"headroom", 0.0}};
  auto with = [&](const std::string& quota_by) {
    auto parameters = common;
    parameters["quota_by"] = quota_by;
    return load<lrmoe::PlacementPolicy>("lrmoe", parameters)->plan(request);
  };
  const PlacementPlan by_count = with("count"), by_mass = with("score_mass");
  CHECK(by_count.quota_pool.empty());
  CHECK(by_mass.quota_pool == std::vector<int64_t>{lrmoe::kNoQuotaPool, 0, 1, 1});
  CHECK(by_mass.quota == by_count.quota);
  CHECK(layout(by_mass) == layout(by_count));
}

TEST_CASE("lrmoe adds the replicas the forward needs to fit the budget beyond max_replicas",
          "[policies]") {
  // E = 4, R = 2, S = 3, n = [60, 20, 10, 10]; expert parameters 10, forward pairs 1 byte,
  // backward pairs 10. Owners only: rank 0 holds 2 * 2 * 10 + 80 = 120 > 100 in forward, even
  // with no backward pairs. A replica of e0 on rank 1 leaves rank 0 with 40 + 50 = 90 and gives
  // rank 1 40 + 10 + max(20 + 30, 10) = 100: both fit.
  PlacementRequest request = forward_bound_request(100);
  const PlacementPlan plan = forced_lrmoe()->plan(request);
  CHECK(check_valid_plan(request, plan) == std::vector<int64_t>{2, 1, 1, 1});
  for (const double memory : rank_memory(request, plan)) CHECK(memory <= 100);

  SECTION("and, where no rank fits one yet, one that lowers the peak, then none") {
    request.budget_bytes = 99;  // rank 1 would need 100 with the replica
    const PlacementPlan closer = forced_lrmoe(/*forward_fallback=*/false)->plan(request);
    CHECK(check_valid_plan(request, closer) == std::vector<int64_t>{2, 1, 1, 1});
    CHECK(closer.forward_capacity.empty());
    const std::vector<double> memory = rank_memory(request, closer);
    CHECK(*std::max_element(memory.begin(), memory.end()) == 100);  // from 120: still over
  }
}

TEST_CASE(
    "when no replicas let the forward fit, lrmoe caps each instance's forward pairs at the most "
    "that fit and drops the rest of the overflowing experts' pairs",
    "[policies]") {
  // As above at budget 99: with e0's replica rank 1 holds 40 + 10 + max(20 + 30, 10) = 100 > 99
  // (owners e2 e3, 10 pairs each, and half of e0's 60). Capping each instance at c pairs: rank 1
  // holds 50 + min(30, c) + 20 and rank 0 40 + min(30, c) + min(20, c); the largest c that fits
  // both is 29, so e0 computes at most 58 of its 60 pairs and the others all theirs.
  PlacementRequest request = forward_bound_request(99);
  const PlacementPlan plan = forced_lrmoe()->plan(request);
  CHECK(check_valid_plan(request, plan) == std::vector<int64_t>{2, 1, 1, 1});
  CHECK(plan.forward_capacity == std::vector<int64_t>{58, 20, 10, 10});
  CHECK(plan.forward_drop == lrmoe::ForwardDrop::LowestGate);
  for (const double memory : rank_memory(request, plan)) CHECK(memory <= 99);
  // Its quotas count only the pairs it computes.
  for (size_t e = 0; e < plan.quota.size(); ++e) CHECK(plan.quota[e] <= plan.forward_capacity[e]);

  SECTION("replicas placed to bring a fit closer are taken back where they do not fit at all") {
    // E = 2 on R = 8, S = 2, n = [300, 10], budget 35. Step 2b spreads e0 over every rank, the
    // last replica on rank 1 beside e1's owner: 20 + 10 + 10 (its gradient) = 40 > 35 with no
    // pairs at all. It is taken back; then each instance takes at most c pairs: rank 0 (owner of
    // e0) holds 20 + min(300 / 7, c) <= 35, so c = 15 and e0 computes 7 * 15 = 105 of its 300.
    PlacementRequest spread = placement_request(8, 2, {300, 10});
    spread.memory = {10, 1, 0, 10};
    spread.budget_bytes = 35;
    const PlacementPlan capped = forced_lrmoe()->plan(spread);
    CHECK(check_valid_plan(spread, capped) == std::vector<int64_t>{7, 1});
    CHECK(capped.forward_capacity == std::vector<int64_t>{105, 10});
    for (const double memory : rank_memory(spread, capped)) CHECK(memory <= 35);
  }
  SECTION("a forward that fits is not capped") {
    request.budget_bytes = 100;
    CHECK(forced_lrmoe()->plan(request).forward_capacity.empty());
  }
  SECTION("nor one whose owned experts alone do not fit") {
    request.budget_bytes = 30;  // rank 0's two owners: 2 * 2 * 10 = 40
    CHECK(forced_lrmoe()->plan(request).forward_capacity.empty());
  }
}

TEST_CASE("lrmoe spreads an expert over as many ranks as its forward needs, beyond the experts",
          "[policies]") {
  // E = 2 on R = 8 ranks (ranks 2-7 own nothing), S = 2, n = [300, 10], budget 100: expert 0
  // fits only in four instances (owner 20 + 75 = 95, replicas 10 + 75 = 85); with two or three
  // no rank can take the next replica and fit, so the first two only lower the peak.
  PlacementRequest request = placement_request(8, 2, {300, 10});
  request.memory = {10, 1, 0, 10};
  request.budget_bytes = 100;
  const PlacementPlan plan = forced_lrmoe()->plan(request);
  CHECK(check_valid_plan(request, plan) == std::vector<int64_t>{4, 1});
  for (const double memory : rank_memory(request, plan)) CHECK(memory <= 100);
}

TEST_CASE("lrmoe's replicas lower the peak forward load under skew", "[policies]") {
  const PlacementRequest request = placement_request(4, 4, {400, 10, 10, 10, 10, 10, 10, 10});
  const PlacementPlan owners_only =
      load<lrmoe::PlacementPolicy>("lrmoe", {{"max_replicas", int64_t{0}}})->plan(request);
  CHECK(check_valid_plan(request, owners_only) == std::vector<int64_t>(8, 1));
  const PlacementPlan plan = load<lrmoe::PlacementPolicy>("lrmoe")->plan(request);
  const std::vector<int64_t> copies = check_valid_plan(request, plan);
  CHECK(copies[0] > 1);
  CHECK(sum(copies) - 8 <= 4);
  const std::vector<double> before = forward_load(request, owners_only);
  const std::vector<double> after = forward_load(request, plan);
  CHECK(*std::max_element(after.begin(), after.end()) <
        *std::max_element(before.begin(), before.end()) / 2);
}

TEST_CASE(
    "lrmoe plans are valid and fit the budget over random requests, capping the forward only where "
    "it must",
    "[policies]") {
  std::mt19937_64 random(2024);
  auto uniform = [&](int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(random);
  };
  int plans_with_replicas = 0;
  int plans_cut_by_memory = 0;
  int plans_capped = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t experts = uniform(1, 16);
    const int64_t ranks = uniform(1, 6);
    const int64_t slots = (experts + ranks - 1) / ranks + uniform(0, 3);
    std::vector<int64_t> counts(static_cast<size_t>(experts));
    const double skew = std::uniform_real_distribution<double>(0, 3)(random);
    for (int64_t& count : counts) {
      // Heavy-tailed counts, some zero.
      count = uniform(0, 4) == 0
                  ? 0
                  : static_cast<int64_t>(
                        std::exp(skew * std::uniform_real_distribution<double>(0, 3)(random)) * 10);
    }
    PlacementRequest request = placement_request(ranks, slots, counts);
    request.memory = {uniform(0, 2500), uniform(1, 50), uniform(0, 20), uniform(1, 100)};
    const double total = static_cast<double>(sum(counts));
    // From hopeless to generous.
    request.budget_bytes =
        static_cast<int64_t>(std::uniform_real_distribution<double>(0, 2)(random) *
                             (static_cast<double>(2 * slots * request.memory.expert_bytes) +
                              total * static_cast<double>(request.memory.forward_pair_bytes +
                                                          request.memory.saved_pair_bytes +
                                                          request.memory.backward_pair_bytes)));
    const double keep_fraction =
        uniform(0, 3) == 0 ? 1.0 : std::uniform_real_distribution<double>(0.05, 1)(random);
    const int64_t max_replicas = uniform(0, 6);
    INFO("trial " << trial << ": E " << experts << " R " << ranks << " S " << slots << " budget "
                  << request.budget_bytes);

    const PlacementPlan plan =
        load<lrmoe::PlacementPolicy>(
            "lrmoe", {{"keep_fraction", keep_fraction}, {"max_replicas", max_replicas}})
            ->plan(request);
    const std::vector<int64_t> copies = check_valid_plan(request, plan);
    plans_with_replicas += sum(copies) > experts ? 1 : 0;
    std::set<std::pair<int64_t, int64_t>> expert_on_rank;
    for (const ExpertInstance& instance : plan.instances) {
      // Owners as fixed_ownership; replicas never beside another instance of their expert.
      if (instance.owner) {
        const int64_t per_rank = (experts + ranks - 1) / ranks;
        REQUIRE(instance.rank == instance.expert / per_rank);
        REQUIRE(instance.slot == instance.expert % per_rank);
      }
      REQUIRE(expert_on_rank.insert({instance.expert, instance.rank}).second);
    }
    // The pairs each expert computes: all, unless the forward fallback capped them.
    std::vector<int64_t> computed = counts;
    if (!plan.forward_capacity.empty()) {
      ++plans_capped;
      REQUIRE(plan.forward_capacity.size() == counts.size());
      for (size_t e = 0; e < counts.size(); ++e) {
        REQUIRE(plan.forward_capacity[e] >= 0);
        computed[e] = std::min(counts[e], plan.forward_capacity[e]);
      }
      // Capped only where every pair computed would not fit, even keeping none.
      PlacementPlan uncapped{plan.instances, std::vector<int64_t>(counts.size(), 0), {}};
      const std::vector<double> all_forward = rank_memory(request, uncapped);
      REQUIRE(std::any_of(all_forward.begin(), all_forward.end(), [&](double m) {
        // the budget the plan is made for, less the default headroom, in whole bytes
        return m > static_cast<double>(static_cast<int64_t>(
                       static_cast<double>(request.budget_bytes) * (1 - 0.03)));
      }));
    }
    for (size_t e = 0; e < counts.size(); ++e) {
      REQUIRE(plan.quota[e] >= 0);
      REQUIRE(plan.quota[e] <= computed[e]);
    }
    REQUIRE(sum(plan.quota) <= static_cast<int64_t>(std::ceil(keep_fraction * total)));

    // The plan fits whenever it keeps anything, and whenever the owners alone fit with no
    // backward pairs (then a feasible plan exists: replicas only go where they fit).
    PlacementPlan owners_only{{}, std::vector<int64_t>(counts.size(), 0), {}};
    for (const ExpertInstance& instance : plan.instances) {
      if (instance.owner) owners_only.instances.push_back(instance);
    }
    const std::vector<double> bare = rank_memory(request, owners_only);
    const bool feasible = std::all_of(bare.begin(), bare.end(), [&](double m) {
      return m <= static_cast<double>(request.budget_bytes);
    });
    // Replicas beyond max_replicas only when the owners' forward alone does not fit.
    if (feasible) REQUIRE(sum(copies) - experts <= max_replicas);
    const bool keeps = sum(plan.quota) > 0;
    const std::vector<double> memory = rank_memory(request, plan);
    const bool fits = std::all_of(memory.begin(), memory.end(), [&](double m) {
      return m <= static_cast<double>(request.budget_bytes) * (1 + 1e-12);
    });
    if (feasible || keeps || !plan.forward_capacity.empty()) {
      REQUIRE(fits);
    }
    // The quotas are the largest water level's: at the next level where a quota grows, the sum
    // passes K or a rank passes the budget the plan is made for (less the default headroom).
    double next_level = std::numeric_limits<double>::infinity();
    for (size_t e = 0; e < counts.size(); ++e) {
      if (plan.quota[e] < computed[e])
        next_level = std::min(
            next_level, static_cast<double>(plan.quota[e] + 1) / static_cast<double>(copies[e]));
    }
    if (keeps && std::isfinite(next_level)) {
      PlacementPlan higher = plan;
      for (size_t e = 0; e < counts.size(); ++e) {
        higher.quota[e] = std::min(
            computed[e],
            std::max(plan.quota[e], static_cast<int64_t>(std::floor(
                                        static_cast<double>(copies[e]) * next_level + 1e-9))));
      }
      const double planned = static_cast<double>(request.budget_bytes) * (1 - 0.03);
      const std::vector<double> higher_memory = rank_memory(request, higher);
      const bool over_budget = std::any_of(higher_memory.begin(), higher_memory.end(),
                                           [&](double m) { return m > planned * (1 - 1e-12); });
      REQUIRE((sum(higher.quota) > static_cast<int64_t>(std::ceil(keep_fraction * total)) ||
               over_budget));
    }
    // With room to spare, a K that covers every pair keeps them all.
    PlacementRequest roomy = request;
    roomy.budget_bytes = int64_t{1} << 50;
    const PlacementPlan unconstrained =
        load<lrmoe::PlacementPolicy>(
            "lrmoe", {{"keep_fraction", keep_fraction}, {"max_replicas", max_replicas}})
            ->plan(roomy);
    if (total <= std::ceil(keep_fraction * total)) {
      REQUIRE(unconstrained.quota == counts);
    }
    plans_cut_by_memory += sum(unconstrained.quota) > sum(plan.quota) ? 1 : 0;
  }
  // The random requests exercise both mechanisms.
  CHECK(plans_with_replicas > 20);
  CHECK(plans_cut_by_memory > 20);
  CHECK(plans_capped > 5);
}
