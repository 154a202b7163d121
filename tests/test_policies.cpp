// The built-in policy plugins, loaded from the build's plugin folder as the runner loads them:
// SYMI and fixed ownership against hand-worked examples, the LRMoE planner's invariants over
// random requests, the metric formulas, the selection rules (including the unbiasedness of
// importance sampling by Monte Carlo) and the routing rules.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/plugins/plugin_catalog.hpp"
#include "core/plugins/policy_parameters.hpp"

using lrmoe::ExpertInstance;
using lrmoe::PairBatch;
using lrmoe::PlacementPlan;
using lrmoe::PlacementRequest;
using lrmoe::RoutingRequest;

namespace {

const lrmoe::PluginCatalog& builtin_catalog() {
  static const lrmoe::PluginCatalog catalog =
      lrmoe::PluginCatalog::discover({LRMOE_BUILTIN_PLUGIN_DIR});
  return catalog;
}

// The built-in plugin `name` of the kind of interface T, created with `values` for some of its
// parameters (the others take their defaults), as the runner creates it.
template <typename T>
std::shared_ptr<T> load(const std::string& name,
                        const std::map<std::string, lrmoe::ParameterValue>& values = {}) {
  const lrmoe::PluginInfo* info = builtin_catalog().find(lrmoe::policy_kind_of<T>(), name);
  REQUIRE(info != nullptr);
  std::map<std::string, lrmoe::PolicySetting> settings;
  for (const auto& [key, value] : values) {
    settings[key] = lrmoe::PolicySetting{value, "test_policies.cpp"};
  }
  return std::static_pointer_cast<T>(
      lrmoe::create_policy(*info, lrmoe::resolve_parameters(*info, settings)));
}

std::vector<int64_t> to_vector(const at::Tensor& tensor) {
  const at::Tensor cpu = tensor.to(at::kCPU, at::kLong).contiguous();
  return {cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel()};
}

std::vector<float> to_floats(const at::Tensor& tensor) {
  const at::Tensor cpu = tensor.to(at::kCPU, at::kFloat).contiguous();
  return {cpu.data_ptr<float>(), cpu.data_ptr<float>() + cpu.numel()};
}

int64_t sum(const std::vector<int64_t>& values) {
  return std::accumulate(values.begin(), values.end(), int64_t{0});
}

// ---- placement ----

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

// ---- backward-phase pairs ----

// Pairs sorted by expert, `pairs_per_expert[e]` of expert e, with the given quotas and unit
// signals; tests set the signals they need.
PairBatch pair_batch(const std::vector<int64_t>& pairs_per_expert, std::vector<int64_t> quota) {
  PairBatch pairs;
  pairs.step = 1;
  pairs.seed = 7;
  pairs.expert_offsets = {0};
  std::vector<int64_t> experts;
  for (size_t e = 0; e < pairs_per_expert.size(); ++e) {
    experts.insert(experts.end(), static_cast<size_t>(pairs_per_expert[e]),
                   static_cast<int64_t>(e));
    pairs.expert_offsets.push_back(static_cast<int64_t>(experts.size()));
  }
  const auto count = static_cast<int64_t>(experts.size());
  pairs.experts = at::tensor(experts, at::kLong);
  pairs.gates = at::ones({count});
  pairs.upstream_norm = at::ones({count});
  pairs.input_norm = at::ones({count});
  pairs.quota = std::move(quota);
  return pairs;
}

RoutingRequest routing_request(int64_t ranks, std::vector<ExpertInstance> instances,
                               const std::vector<int64_t>& experts,
                               const std::vector<int64_t>& home_ranks,
                               std::vector<int64_t> capacity) {
  RoutingRequest request;
  request.ranks = ranks;
  request.experts = at::tensor(experts, at::kLong);
  request.home_ranks = at::tensor(home_ranks, at::kLong);
  int64_t num_experts = 0;
  for (const ExpertInstance& instance : instances) {
    num_experts = std::max(num_experts, instance.expert + 1);
  }
  request.expert_instances.resize(static_cast<size_t>(num_experts));
  // The owner first, then the replicas in instance order.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < instances.size(); ++i) {
      if (instances[i].owner == (pass == 0)) {
        request.expert_instances[static_cast<size_t>(instances[i].expert)].push_back(
            static_cast<int64_t>(i));
      }
    }
  }
  request.instances = std::move(instances);
  request.capacity = std::move(capacity);
  return request;
}

// Per rank, the pairs a routing sends there.
std::vector<int64_t> rank_loads(const RoutingRequest& request, const std::vector<int64_t>& routed) {
  std::vector<int64_t> loads(static_cast<size_t>(request.ranks), 0);
  for (const int64_t instance : routed) {
    ++loads[static_cast<size_t>(request.instances[static_cast<size_t>(instance)].rank)];
  }
  return loads;
}

void check_eligible(const RoutingRequest& request, const std::vector<int64_t>& routed) {
  const std::vector<int64_t> experts = to_vector(request.experts);
  REQUIRE(routed.size() == experts.size());
  for (size_t i = 0; i < routed.size(); ++i) {
    REQUIRE(routed[i] >= 0);
    REQUIRE(routed[i] < static_cast<int64_t>(request.instances.size()));
    REQUIRE(request.instances[static_cast<size_t>(routed[i])].expert == experts[i]);
  }
}

}  // namespace

TEST_CASE("Every built-in policy plugin loads with its name, kind and version", "[policies]") {
  const std::vector<std::pair<lrmoe::PolicyKind, std::vector<std::string>>> expected = {
      {lrmoe::PolicyKind::Placement, {"fixed_ownership", "symi", "lrmoe"}},
      {lrmoe::PolicyKind::Metric, {"gate", "gate_grad_norm", "grad_contribution", "random"}},
      {lrmoe::PolicyKind::Selection,
       {"keep_all", "quota_topk", "threshold", "importance_sampling"}},
      {lrmoe::PolicyKind::Routing, {"owner", "round_robin", "capacity_aware"}}};
  for (const auto& [kind, names] : expected) {
    for (const std::string& name : names) {
      INFO(name);
      const lrmoe::PluginInfo* info = builtin_catalog().find(kind, name);
      REQUIRE(info != nullptr);
      // lrmoe 2: budget-derived quotas; symi 1.1: fit_budget; capacity_aware 1.1: room first.
      const std::string version = name == "lrmoe"                              ? "2.0.0"
                                  : name == "symi" || name == "capacity_aware" ? "1.1.0"
                                                                               : "1.0.0";
      CHECK(info->descriptor.version == version);
      CHECK(info->path.stem() == name);
      CHECK(lrmoe::create_policy(*info, lrmoe::resolve_parameters(*info, {})) != nullptr);
    }
  }
}

TEST_CASE("Policy parameters outside their declared range are refused", "[policies]") {
  CHECK_THROWS_AS(load<lrmoe::SelectionPolicy>("threshold", {{"threshold", 1.5}}),
                  lrmoe::PluginError);
  CHECK_THROWS_AS(load<lrmoe::SelectionPolicy>("importance_sampling", {{"uniform_mix", -0.1}}),
                  lrmoe::PluginError);
  CHECK_THROWS_AS(load<lrmoe::PlacementPolicy>("lrmoe", {{"keep_fraction", 1.2}}),
                  lrmoe::PluginError);
  CHECK_THROWS_AS(load<lrmoe::PlacementPolicy>("lrmoe", {{"max_replicas", int64_t{-1}}}),
                  lrmoe::PluginError);
  CHECK_THROWS_AS(load<lrmoe::PlacementPolicy>("symi", {{"capacity_factor", -1.0}}),
                  lrmoe::PluginError);
}

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
  CHECK(plan.quota == request.counts);  // SYMI keeps every pair in backward
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

TEST_CASE("symi with fit_budget lowers its slot capacity to the largest that fits every rank",
          "[policies]") {
  // As above: cnt = [2, 2, 1, 1], slot capacity 6. Rank 0 holds e0, a replica of e0 and e1; rank
  // 1 a replica of e1, e2 and e3: 2 owned and 1 replica each. With expert bytes 50 and pair bytes
  // 1 forward and 10 backward, a rank computing and keeping 3c pairs peaks at
  // 2 * 2 * 50 + 50 + max(3c, 10 * 3c + 50) = 300 + 30c: a budget of 450 holds c = 5.
  PlacementRequest request = placement_request(2, 3, {10, 3, 0, 20});
  request.memory = {50, 1, 0, 10};
  request.budget_bytes = 450;
  const auto fitted = load<lrmoe::PlacementPolicy>("symi", {{"fit_budget", true}});
  const PlacementPlan plan = fitted->plan(request);
  CHECK(plan.forward_capacity == std::vector<int64_t>{10, 10, 5, 5});
  // The published capacity when it fits, and the plan unchanged without fit_budget.
  request.budget_bytes = 480;
  CHECK(fitted->plan(request).forward_capacity == std::vector<int64_t>{12, 12, 6, 6});
  request.budget_bytes = 450;
  CHECK(load<lrmoe::PlacementPolicy>("symi")->plan(request).forward_capacity ==
        std::vector<int64_t>{12, 12, 6, 6});
  // Nothing fits: capacity 0, and the runner reports the numbers.
  request.budget_bytes = 100;
  CHECK(fitted->plan(request).forward_capacity == std::vector<int64_t>{0, 0, 0, 0});
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
  CHECK(dropless.quota == request.counts);
  CHECK(dropless.forward_capacity.empty());  // capacity_factor 0 (default): dropless
  // C = ceil(k * T / E * capacity_factor) = ceil(2 * 25 / 10 * 1.5) = 7.5 -> 8.
  const PlacementPlan capped =
      load<lrmoe::PlacementPolicy>("fixed_ownership", {{"capacity_factor", 1.5}})->plan(request);
  CHECK(capped.forward_capacity == std::vector<int64_t>(10, 8));
  CHECK(load<lrmoe::PlacementPolicy>("fixed_ownership", {{"capacity_factor", 2.0}})
            ->plan(request)
            .forward_capacity == std::vector<int64_t>(10, 10));
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

TEST_CASE("lrmoe plans are valid and fit the budget over random requests", "[policies]") {
  std::mt19937_64 random(2024);
  auto uniform = [&](int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(random);
  };
  int plans_with_replicas = 0;
  int plans_cut_by_memory = 0;
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
    REQUIRE(sum(copies) - experts <= max_replicas);
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
    REQUIRE(plan.forward_capacity.empty());
    for (size_t e = 0; e < counts.size(); ++e) {
      REQUIRE(plan.quota[e] >= 0);
      REQUIRE(plan.quota[e] <= counts[e]);
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
    const bool keeps = sum(plan.quota) > 0;
    const std::vector<double> memory = rank_memory(request, plan);
    const bool fits = std::all_of(memory.begin(), memory.end(), [&](double m) {
      return m <= static_cast<double>(request.budget_bytes) * (1 + 1e-12);
    });
    if (feasible || keeps) {
      REQUIRE(fits);
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
}

// ---- metrics ----

TEST_CASE("Metrics compute their formulas per pair", "[policies]") {
  PairBatch pairs = pair_batch({2, 1}, {2, 1});
  pairs.gates = at::tensor({0.5F, 0.25F, 1.0F});
  pairs.upstream_norm = at::tensor({2.0F, 4.0F, 0.0F});
  pairs.input_norm = at::tensor({3.0F, 1.0F, 5.0F});
  const auto score = [&](const std::string& name) {
    return to_floats(load<lrmoe::MetricPolicy>(name)->score(pairs));
  };

  CHECK(score("gate") == std::vector<float>{0.5F, 0.25F, 1.0F});
  CHECK(score("gate_grad_norm") == std::vector<float>{1.0F, 1.0F, 0.0F});
  // Without |h|: g * |d| * |x|.
  CHECK(score("grad_contribution") == std::vector<float>{3.0F, 1.0F, 0.0F});
  // With |h|: g * |d| * |h|.
  pairs.hidden_norm = at::tensor({10.0F, 0.5F, 2.0F});
  CHECK(score("grad_contribution") == std::vector<float>{10.0F, 0.5F, 0.0F});
  CHECK(load<lrmoe::MetricPolicy>("gate")->score(pairs).scalar_type() == at::kFloat);
}

TEST_CASE("The random metric is uniform and deterministic per seed", "[policies]") {
  PairBatch pairs = pair_batch({500, 500}, {500, 500});
  const auto metric = load<lrmoe::MetricPolicy>("random");
  const at::Tensor first = metric->score(pairs);
  REQUIRE(first.scalar_type() == at::kFloat);
  REQUIRE(first.numel() == 1000);
  CHECK(first.min().item<float>() >= 0.0F);
  CHECK(first.max().item<float>() < 1.0F);
  CHECK(first.mean().item<float>() == Approx(0.5).margin(0.05));
  CHECK(at::equal(first, metric->score(pairs)));
  pairs.seed = 8;
  CHECK_FALSE(at::equal(first, metric->score(pairs)));
}

// ---- selection ----

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

TEST_CASE("importance_sampling is unbiased and keeps the quota in expectation", "[policies]") {
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
    for (size_t j = 0; j < kept.size(); ++j) {
      const auto e = static_cast<size_t>(expert_of[static_cast<size_t>(kept[j])]);
      REQUIRE(e != 3);
      if (e == 2) REQUIRE(weights[j] == 1.0F);
      REQUIRE(weights[j] >= 1.0F);
      estimate[e] += weights[j] * value[static_cast<size_t>(kept[j])];
      kept_sum[e] += 1;
    }
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

// ---- routing ----

namespace {

// Rank 0: e0 (owner), e2 (replica); rank 1: e1 (owner), e0 (replica); rank 2: e2 (owner), e0
// (replica).
std::vector<ExpertInstance> three_rank_instances() {
  return {{0, 0, 0, true},  {1, 1, 0, true},  {2, 2, 0, true},
          {0, 1, 1, false}, {0, 2, 1, false}, {2, 0, 1, false}};
}

}  // namespace

TEST_CASE("owner routing sends every pair to its expert's owner", "[policies]") {
  const RoutingRequest request =
      routing_request(3, three_rank_instances(), {0, 0, 1, 2, 2}, {2, 1, 0, 0, 1}, {9, 9, 9});
  CHECK(to_vector(load<lrmoe::RoutingPolicy>("owner")->route(request)) ==
        std::vector<int64_t>{0, 0, 1, 2, 2});
}

TEST_CASE("round_robin splits each expert's pairs evenly over its instances", "[policies]") {
  // Expert 0 has instances 0, 3, 4 (owner first); expert 2 has 2, 5.
  const RoutingRequest request =
      routing_request(3, three_rank_instances(), {0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 2},
                      std::vector<int64_t>(11, 0), {0, 0, 0});
  const at::Tensor routed = load<lrmoe::RoutingPolicy>("round_robin")->route(request);
  CHECK(routed.scalar_type() == at::kLong);
  CHECK(to_vector(routed) == std::vector<int64_t>{0, 3, 4, 0, 3, 4, 0, 1, 2, 5, 2});
}

TEST_CASE("capacity_aware routing stays eligible and within capacity when it suffices",
          "[policies]") {
  // 6 pairs of e0, 3 of e1, 3 of e2 over 3 ranks of capacity 4: e1 (one instance) fills rank 1
  // with 3, e2 (two) then e0 (three) fill the rest to exactly 4 per rank.
  const std::vector<int64_t> experts = {0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2};
  const std::vector<int64_t> homes = {0, 0, 0, 0, 0, 0, 2, 2, 2, 1, 1, 1};
  const RoutingRequest request =
      routing_request(3, three_rank_instances(), experts, homes, {4, 4, 4});
  const std::vector<int64_t> routed =
      to_vector(load<lrmoe::RoutingPolicy>("capacity_aware")->route(request));
  check_eligible(request, routed);
  CHECK(rank_loads(request, routed) == std::vector<int64_t>{4, 4, 4});

  std::mt19937 random(5);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<int64_t> random_experts(
        static_cast<size_t>(std::uniform_int_distribution<int>(0, 40)(random)));
    std::vector<int64_t> random_homes(random_experts.size());
    for (size_t i = 0; i < random_experts.size(); ++i) {
      random_experts[i] = std::uniform_int_distribution<int64_t>(0, 2)(random);
      random_homes[i] = std::uniform_int_distribution<int64_t>(0, 2)(random);
    }
    std::sort(random_experts.begin(), random_experts.end());
    // Enough room for expert 1 (only on rank 1) and the rest anywhere.
    const auto ones = std::count(random_experts.begin(), random_experts.end(), 1);
    const auto others = static_cast<int64_t>(random_experts.size()) - ones;
    const std::vector<int64_t> capacity = {(others + 1) / 2, ones, others - (others + 1) / 2};
    const RoutingRequest random_request =
        routing_request(3, three_rank_instances(), random_experts, random_homes, capacity);
    const std::vector<int64_t> random_routed =
        to_vector(load<lrmoe::RoutingPolicy>("capacity_aware")->route(random_request));
    check_eligible(random_request, random_routed);
    const std::vector<int64_t> loads = rank_loads(random_request, random_routed);
    for (size_t r = 0; r < 3; ++r) {
      CHECK(loads[r] <= capacity[r]);
    }
  }
}

TEST_CASE("capacity_aware prefers the home rank, then the lower instance, on equal load",
          "[policies]") {
  const auto policy = load<lrmoe::RoutingPolicy>("capacity_aware");
  const auto route_one = [&](int64_t expert, int64_t home) {
    return to_vector(
        policy->route(routing_request(3, three_rank_instances(), {expert}, {home}, {5, 5, 5})))[0];
  };
  // Expert 0 lives on ranks 0 (instance 0), 1 (instance 3), 2 (instance 4).
  CHECK(route_one(0, 0) == 0);
  CHECK(route_one(0, 1) == 3);
  CHECK(route_one(0, 2) == 4);
  // Expert 2 lives on ranks 2 (instance 2) and 0 (instance 5); home rank 1 hosts neither.
  CHECK(route_one(2, 0) == 5);
  CHECK(route_one(2, 1) == 2);
}

TEST_CASE("capacity_aware fills the rank with the most room first when capacities differ",
          "[policies]") {
  // Three pairs of e0 (ranks 0, 1, 2), all at home on rank 1, capacities 10, 2 and 2: rank 0 has
  // the most room after each of them (10, 9, 8 against 2), so all three go there.
  const RoutingRequest request =
      routing_request(3, three_rank_instances(), {0, 0, 0}, {1, 1, 1}, {10, 2, 2});
  CHECK(to_vector(load<lrmoe::RoutingPolicy>("capacity_aware")->route(request)) ==
        std::vector<int64_t>{0, 0, 0});
}

TEST_CASE("capacity_aware serves experts with fewer instances first", "[policies]") {
  // Capacity 1 per rank. Two pairs of e0 (three instances) come before one pair of e1 (only on
  // rank 1), all at home on rank 1. e1 is served first and takes rank 1; e0 goes to ranks 0, 2.
  const RoutingRequest request =
      routing_request(3, three_rank_instances(), {0, 0, 1}, {1, 1, 1}, {1, 1, 1});
  const std::vector<int64_t> routed =
      to_vector(load<lrmoe::RoutingPolicy>("capacity_aware")->route(request));
  CHECK(routed == std::vector<int64_t>{0, 4, 1});
}

TEST_CASE("capacity_aware overflows to the least-loaded instance when capacity is short",
          "[policies]") {
  // Five pairs of e0 (ranks 0, 1, 2), capacity 1 each: one per rank, then the overflow goes to
  // the least-loaded rank again, preferring home (rank 2) on equal load.
  const RoutingRequest request =
      routing_request(3, three_rank_instances(), {0, 0, 0, 0, 0}, {2, 2, 2, 2, 2}, {1, 1, 1});
  const std::vector<int64_t> routed =
      to_vector(load<lrmoe::RoutingPolicy>("capacity_aware")->route(request));
  check_eligible(request, routed);
  CHECK(routed == std::vector<int64_t>{4, 0, 3, 4, 0});
  CHECK(rank_loads(request, routed) == std::vector<int64_t>{2, 1, 2});
}
