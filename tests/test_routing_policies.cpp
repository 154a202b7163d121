// The built-in routing plugins: owner, round_robin, and capacity_aware's eligibility, capacity,
// tie-breaking and overflow rules.

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <utility>
#include <vector>

#include "support/builtin_policies.hpp"

using lrmoe::ExpertInstance;
using lrmoe::RoutingRequest;
using lrmoe_test::load;
using lrmoe_test::to_vector;

namespace {

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

// `experts` owners on random ranks, and a replica of each on every other rank with odds 1 in
// `replica_odds`; hosts[e]: the ranks hosting expert e, owner first.
struct RandomPlacement {
  std::vector<ExpertInstance> instances;
  std::vector<std::vector<int64_t>> hosts;
};
RandomPlacement random_placement(std::mt19937& random, int64_t ranks, int64_t experts,
                                 int64_t replica_odds) {
  auto below = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(random); };
  RandomPlacement p{{}, std::vector<std::vector<int64_t>>(static_cast<size_t>(experts))};
  std::vector<int64_t> slots(static_cast<size_t>(ranks), 0);
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t owner = below(ranks);
    p.instances.push_back({e, owner, slots[static_cast<size_t>(owner)]++, true});
    p.hosts[static_cast<size_t>(e)].push_back(owner);
    for (int64_t r = 0; r < ranks; ++r) {
      if (r != owner && below(replica_odds) == 0) {
        p.instances.push_back({e, r, slots[static_cast<size_t>(r)]++, false});
        p.hosts[static_cast<size_t>(e)].push_back(r);
      }
    }
  }
  return p;
}

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

TEST_CASE("capacity_aware overflows as little as possible when capacity is short", "[policies]") {
  // Five pairs of e0 (ranks 0, 1, 2), capacity 1 each: no rank need take more than 2. The two
  // the home rank (2) can take stay there; the rest go in instance order (ranks 0, 1).
  const RoutingRequest request =
      routing_request(3, three_rank_instances(), {0, 0, 0, 0, 0}, {2, 2, 2, 2, 2}, {1, 1, 1});
  const std::vector<int64_t> routed =
      to_vector(load<lrmoe::RoutingPolicy>("capacity_aware")->route(request));
  check_eligible(request, routed);
  CHECK(routed == std::vector<int64_t>{4, 4, 0, 0, 3});
  CHECK(rank_loads(request, routed) == std::vector<int64_t>{2, 1, 2});
}

TEST_CASE("capacity_aware fits where filling the rank with the most room first does not",
          "[policies]") {
  // e0 on ranks 0 and 1, e1 on ranks 1 and 2, one pair of room per rank. A greedy fill sends
  // e0's pair home to rank 1, and then e1's two pairs have one place left; the only routing
  // that fits sends e0 to rank 0.
  const std::vector<ExpertInstance> instances = {
      {0, 0, 0, true}, {1, 1, 0, true}, {0, 1, 1, false}, {1, 2, 0, false}};
  const RoutingRequest request = routing_request(3, instances, {0, 1, 1}, {1, 0, 0}, {1, 1, 1});
  CHECK(to_vector(load<lrmoe::RoutingPolicy>("capacity_aware")->route(request)) ==
        std::vector<int64_t>{0, 1, 3});
}

TEST_CASE("capacity_aware stays within capacity whenever some routing does", "[policies]") {
  // Random placements and pairs; the capacities are the loads of a random eligible routing, so
  // one routing fits exactly. capacity_aware must find one too.
  const auto policy = load<lrmoe::RoutingPolicy>("capacity_aware");
  std::mt19937 random(11);
  auto below = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(random); };
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t ranks = 2 + below(5);
    const int64_t experts = 1 + below(8);
    const auto [instances, hosts] = random_placement(random, ranks, experts, 4);
    std::vector<int64_t> pair_experts(static_cast<size_t>(below(60)));
    for (int64_t& e : pair_experts) e = below(experts);
    std::sort(pair_experts.begin(), pair_experts.end());
    std::vector<int64_t> homes(pair_experts.size());
    std::vector<int64_t> capacity(static_cast<size_t>(ranks), 0);
    for (size_t i = 0; i < pair_experts.size(); ++i) {
      homes[i] = below(ranks);
      const std::vector<int64_t>& on = hosts[static_cast<size_t>(pair_experts[i])];
      ++capacity[static_cast<size_t>(
          on[static_cast<size_t>(below(static_cast<int64_t>(on.size())))])];
    }
    const RoutingRequest request = routing_request(ranks, instances, pair_experts, homes, capacity);
    const std::vector<int64_t> routed = to_vector(policy->route(request));
    check_eligible(request, routed);
    const std::vector<int64_t> loads = rank_loads(request, routed);
    for (size_t r = 0; r < capacity.size(); ++r) CHECK(loads[r] <= capacity[r]);

    // One pair of room less on a busy rank: the random routing now overflows by one there, so
    // the least overflow is at most one.
    RoutingRequest tighter = request;
    const auto busiest = std::max_element(tighter.capacity.begin(), tighter.capacity.end());
    if (*busiest == 0) continue;
    --*busiest;
    const std::vector<int64_t> tight_loads = rank_loads(tighter, to_vector(policy->route(tighter)));
    for (size_t r = 0; r < capacity.size(); ++r) CHECK(tight_loads[r] <= tighter.capacity[r] + 1);
  }
}

TEST_CASE("capacity_aware routes within the least shift Hall's condition allows", "[policies]") {
  // Small random cases with capacity short or plentiful. The least feasible shift s*, from
  // every subset of experts (Hall's condition: its pairs fit on the ranks hosting it, each
  // holding max(0, capacity + s)), bounds every rank's load; at s* - 1 the pairs do not fit, so
  // a routing within those bounds is one at the least shift.
  const auto policy = load<lrmoe::RoutingPolicy>("capacity_aware");
  std::mt19937 random(5);
  auto below = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(random); };
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t ranks = 2 + below(4);
    const int64_t experts = 1 + below(5);
    const auto [instances, host_lists] = random_placement(random, ranks, experts, 3);
    std::vector<uint32_t> hosts(static_cast<size_t>(experts), 0);  // bit r: an instance on r
    for (size_t e = 0; e < hosts.size(); ++e)
      for (const int64_t r : host_lists[e]) hosts[e] |= 1U << r;
    std::vector<int64_t> pair_experts(static_cast<size_t>(1 + below(40)));
    for (int64_t& e : pair_experts) e = below(experts);
    std::sort(pair_experts.begin(), pair_experts.end());
    std::vector<int64_t> homes(pair_experts.size()), supply(static_cast<size_t>(experts), 0);
    for (size_t i = 0; i < pair_experts.size(); ++i) {
      homes[i] = below(ranks);
      ++supply[static_cast<size_t>(pair_experts[i])];
    }
    std::vector<int64_t> capacity(static_cast<size_t>(ranks));
    for (int64_t& c : capacity) c = below(20);
    auto feasible = [&](int64_t shift) {
      for (uint32_t subset = 1; subset < (1U << experts); ++subset) {
        int64_t pairs = 0, room = 0;
        uint32_t reach = 0;
        for (int64_t e = 0; e < experts; ++e) {
          if ((subset >> e & 1U) == 0) continue;
          pairs += supply[static_cast<size_t>(e)];
          reach |= hosts[static_cast<size_t>(e)];
        }
        for (int64_t r = 0; r < ranks; ++r)
          if (reach >> r & 1U)
            room += std::max<int64_t>(0, capacity[static_cast<size_t>(r)] + shift);
        if (pairs > room) return false;
      }
      return true;
    };
    int64_t least = -20;
    while (!feasible(least)) ++least;
    const RoutingRequest request = routing_request(ranks, instances, pair_experts, homes, capacity);
    const std::vector<int64_t> routed = to_vector(policy->route(request));
    check_eligible(request, routed);
    const std::vector<int64_t> loads = rank_loads(request, routed);
    for (size_t r = 0; r < loads.size(); ++r)
      CHECK(loads[r] <= std::max<int64_t>(0, capacity[r] + least));
  }
}

TEST_CASE("Count routings give each (home rank, expert) the instance counts of their pair routing",
          "[policies]") {
  // Pairs in pair order, by expert and then home rank (Note [Pair order]); random placements and
  // capacities, ample and short. The scalable plan relies on the two forms agreeing.
  std::mt19937 random(23);
  auto below = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(random); };
  for (const char* name : {"owner", "round_robin", "capacity_aware"}) {
    INFO(name);
    const auto policy = load<lrmoe::RoutingPolicy>(name);
    const auto counting = std::dynamic_pointer_cast<lrmoe::CountRoutingPolicy>(policy);
    REQUIRE(counting != nullptr);
    for (int trial = 0; trial < 100; ++trial) {
      const int64_t ranks = 1 + below(5);
      const int64_t experts = 1 + below(6);
      std::vector<ExpertInstance> instances;
      std::vector<int64_t> slots(static_cast<size_t>(ranks), 0);
      for (int64_t e = 0; e < experts; ++e) {
        const int64_t owner = below(ranks);
        instances.push_back({e, owner, slots[static_cast<size_t>(owner)]++, true});
        for (int64_t r = 0; r < ranks; ++r) {
          if (below(3) == 0) instances.push_back({e, r, slots[static_cast<size_t>(r)]++, false});
        }
      }
      std::vector<std::pair<int64_t, int64_t>> pairs(static_cast<size_t>(below(80)));
      for (auto& [expert, home] : pairs) expert = below(experts), home = below(ranks);
      std::sort(pairs.begin(), pairs.end());
      std::vector<int64_t> pair_experts, homes;
      for (const auto& [expert, home] : pairs)
        pair_experts.push_back(expert), homes.push_back(home);
      std::vector<int64_t> capacity(static_cast<size_t>(ranks));
      for (int64_t& room : capacity)
        room = below(2 * static_cast<int64_t>(pairs.size()) / ranks + 2);
      const RoutingRequest request =
          routing_request(ranks, instances, pair_experts, homes, capacity);
      const std::vector<int64_t> routed = to_vector(policy->route(request));

      const auto I = static_cast<int64_t>(request.instances.size());
      std::vector<int64_t> expected(static_cast<size_t>(ranks * I), 0);
      lrmoe::CountRoutingRequest counts;
      counts.ranks = ranks;
      counts.num_experts = experts;
      counts.pairs.assign(static_cast<size_t>(ranks * experts), 0);
      for (size_t i = 0; i < pairs.size(); ++i) {
        ++expected[static_cast<size_t>(homes[i] * I + routed[i])];
        ++counts.pairs[static_cast<size_t>(homes[i] * experts + pair_experts[i])];
      }
      counts.instances = request.instances;
      counts.expert_instances = request.expert_instances;
      counts.capacity = capacity;
      CHECK(counting->route_counts(counts) == expected);
    }
  }
}
