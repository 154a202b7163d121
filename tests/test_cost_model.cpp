// The cost model's formulas on hand-computed examples (Note [Cost model]), and the critical path
// (Note [Critical path]): a skewed routing has a longer one than a balanced routing of the same
// total work. And what the scalable plan's collectives are charged (Note [Scalable planning]).
#include <catch2/catch.hpp>

#include <numeric>

#include "core/cost/cost_model.hpp"
#include "core/pipeline/critical_path.hpp"
#include "core/pipeline/plan_collectives.hpp"

using namespace lrmoe;

namespace {

// Two nodes of two ranks; round numbers.
HardwareProfile two_by_two() {
  HardwareProfile p;
  p.name = "test";
  p.peak_flops = 1e12;
  p.gemm_efficiency = {{1, 0.5}, {100, 1.0}};
  p.memory_bandwidth = 1e12;
  p.element_bytes = 2;
  p.ranks_per_node = 2;
  p.intra_node_bandwidth = 100e9;
  p.intra_node_latency = 1e-6;
  p.inter_node_bandwidth = 10e9;
  p.inter_node_latency = 10e-6;
  p.host_link_bandwidth = 50e9;
  return p;
}

}  // namespace

TEST_CASE("an exchange ends when the slowest rank's busiest link does", "[cost]") {
  const CostModel model(two_by_two());
  TrafficMatrix t(4);
  t.at(0, 1) = 1e6;  // intra-node: 1e-6 + 1e6 / 100e9 = 11 us
  t.at(0, 2) = 1e6;  // inter-node: 10e-6 + 1e6 / 10e9 = 110 us
  t.at(3, 2) = 2e5;  // intra-node, rank 2 receives: 1e-6 + 2e5 / 100e9 = 3 us
  // Rank 0: max(11, 110) us; rank 2 receives 1e6 over the inter-node link: 110 us as well.
  CHECK(model.exchange_seconds(t) == Approx(110e-6));
  TrafficMatrix none(4);
  CHECK(model.exchange_seconds(none) == 0);
}

TEST_CASE(
    "a hierarchical all-to-all relays rows for another node through the destination's "
    "local index",
    "[cost]") {
  const CostModel flat(two_by_two());
  const CostModel hierarchical(two_by_two(), CostOptions{AllToAllAlgorithm::Hierarchical});
  SECTION("one large message pays both stages: flat is faster") {
    TrafficMatrix t(4);
    t.at(0, 3) = 1e6;  // node 0 local 0 to node 1 local 1: relayed by rank 1
    const auto [within, across] = hierarchical.hierarchical_stages(t);
    CHECK(within.at(0, 1) == 1e6);
    CHECK(across.at(1, 3) == 1e6);
    CHECK(flat.all_to_all_seconds(t) == Approx(10e-6 + 1e6 / 10e9));
    // 11 us within, then 110 us across.
    CHECK(hierarchical.all_to_all_seconds(t) == Approx(1e-6 + 1e6 / 100e9 + 10e-6 + 1e6 / 10e9));
  }
  SECTION("small messages to every rank pay fewer inter-node latencies: hierarchical is faster") {
    TrafficMatrix t(4);
    for (int64_t s = 0; s < 4; ++s)
      for (int64_t d = 0; d < 4; ++d) t.at(s, d) = s == d ? 0 : 1e3;
    // Flat: two peers on the other node, 2 * 10 us + 2e3 / 10e9.
    CHECK(flat.all_to_all_seconds(t) == Approx(20e-6 + 2e3 / 10e9));
    // Within: its own row and the one it relays to its one local peer, 1 us + 2e3 / 100e9;
    // across: both local ranks' rows to its one peer of the same local index, 10 us + 2e3 / 10e9.
    CHECK(hierarchical.all_to_all_seconds(t) == Approx(1e-6 + 2e3 / 100e9 + 10e-6 + 2e3 / 10e9));
  }
  SECTION("a local index the destination's node lacks wraps round on the smaller node") {
    TrafficMatrix t(3);  // rank 2 alone on node 1
    t.at(2, 1) = 1;
    t.at(1, 2) = 1;
    const auto [within, across] = hierarchical.hierarchical_stages(t);
    CHECK(across.at(2, 1) == 1);  // rank 2 is its own node's every local index
    CHECK(within.at(1, 0) == 1);  // rank 2's local index 0 on node 0 is rank 0
    CHECK(across.at(0, 2) == 1);
    CHECK(std::accumulate(within.bytes.begin(), within.bytes.end(), 0.0) == 1);
    CHECK(std::accumulate(across.bytes.begin(), across.bytes.end(), 0.0) == 2);
  }
  SECTION("within one node there is nothing to relay") {
    TrafficMatrix t(2);
    t.at(0, 1) = 1e6;
    CHECK(hierarchical.all_to_all_seconds(t) == flat.all_to_all_seconds(t));
  }
  TrafficMatrix t(4);
  t.at(0, 1) = 5;
  t.at(0, 2) = 7;
  t.at(3, 1) = 11;
  CHECK(flat.cross_node_bytes(t) == 18);
}

TEST_CASE("chunks overlap their transfers with the compute of their neighbours", "[cost]") {
  // One chunk: one after the other.
  CHECK(chunked_phase_seconds({2}, {5}, {3}) == 10);
  // Compute-bound: chunk 1's dispatch (1) hides behind chunk 0's compute (3), chunk 0's return
  // behind chunk 1's; the first dispatch and the last return are exposed: 1 + 3 + 3 + 1.
  CHECK(chunked_phase_seconds({1, 1}, {3, 3}, {1, 1}) == 8);
  // Transfer-bound: the link is never idle after the first dispatch, and chunk 0's compute (1)
  // and chunk 1's (1, after its dispatch ends at 6) hide: dispatch 3 + 3, return 3 + 3.
  CHECK(chunked_phase_seconds({3, 3}, {1, 1}, {3, 3}) == 12);
  // The link carries one transfer at a time, in issue order: chunk 0's return (issued at 4)
  // waits for chunk 1's dispatch (2 to 6).
  CHECK(chunked_phase_seconds({2, 4}, {2, 1}, {1, 1}) == Approx(2 + 4 + 1 + 1));
}

TEST_CASE(
    "a GEMM is as slow as its FLOPs at the curve's efficiency or its bytes, whichever is slower",
    "[cost]") {
  const CostModel model(two_by_two());
  // 100 rows: efficiency 1; 2 * 100 * 1000 * 1000 FLOPs / 1e12 = 200 us; bytes 2 * (1e5 + 1e6 +
  // 1e5) / 1e12 = 2.4 us.
  CHECK(model.gemm_seconds(100, 1000, 1000) == Approx(200e-6));
  // 1 row: efficiency 0.5: 2e6 / 0.5e12 = 4 us; bytes 2 * (1000 + 1e6 + 1000) / 1e12 = 2.004 us.
  CHECK(model.gemm_seconds(1, 1000, 1000) == Approx(4e-6));
  // 10 rows: efficiency 0.75 (halfway in log rows): 2e7 / 0.75e12.
  CHECK(model.gemm_seconds(10, 1000, 1000) == Approx(2e7 / 0.75e12));
  CHECK(model.gemm_seconds(0, 1000, 1000) == 0);
}

TEST_CASE("collectives pay a latency per step and their bytes over the bottleneck link", "[cost]") {
  const CostModel model(two_by_two());
  // Four ranks span two nodes: the inter-node link. All-gather of 1e6 bytes each: 3 latencies and
  // 3e6 received bytes.
  CHECK(model.all_gather_seconds({1e6, 1e6, 1e6, 1e6}) == Approx(3 * 10e-6 + 3e6 / 10e9));
  // All-reduce of 1e6 bytes on two ranks of one node: 2 latencies and 2 * 1/2 * 1e6 bytes.
  CHECK(model.all_reduce_seconds(1e6, 2) == Approx(2 * 1e-6 + 1e6 / 100e9));
  CHECK(model.all_reduce_seconds(1e6, 1) == 0);
  // Four ranks over two nodes: a ring's 6 steps (6 * 10 us + 1.5 * 1e6 / 10e9 = 210 us) against
  // a tree's 4 (40 us + 2 * 1e6 / 10e9 = 240 us): the ring is faster for 1e6 bytes, the tree for
  // 1e3 (6 * 10 us + 0.15 us against 4 * 10 us + 0.2 us).
  CHECK(model.all_reduce_seconds(1e6, 4) == Approx(6 * 10e-6 + 1.5e6 / 10e9));
  CHECK(model.all_reduce_seconds(1e3, 4) == Approx(4 * 10e-6 + 2e3 / 10e9));
}

TEST_CASE("a skewed routing has a longer critical path than a balanced one of equal work",
          "[cost]") {
  // Expert seconds from operation counts (one unit per pair), one process hosting two ranks, with
  // one unit of planning and two of shared work per phase.
  auto path_of = [](std::vector<double> forward, std::vector<double> backward) {
    const std::vector<double> expert[kPhases] = {forward, backward};
    ProcessPhaseTimes process;
    for (int phase = 0; phase < kPhases; ++phase) {
      const std::vector<double>& own = expert[phase];
      process.planning[phase] = 1;
      process.wall[phase] = own[0] + own[1] + 1 + 2;
    }
    return critical_path(expert, {process}, 2);
  };
  const CriticalPath balanced = path_of({50, 50}, {25, 25});
  const CriticalPath skewed = path_of({80, 20}, {40, 10});
  CHECK(balanced.rank_sum == Approx(skewed.rank_sum));
  // Each rank: its pairs + the plan + half the shared work.
  CHECK(balanced.seconds == Approx((50 + 1 + 1) + (25 + 1 + 1)));
  CHECK(skewed.seconds == Approx((80 + 1 + 1) + (40 + 1 + 1)));
  CHECK(skewed.seconds > balanced.seconds);
  CHECK(skewed.rank_seconds[kForwardPhase] == std::vector<double>{82, 22});
}

TEST_CASE("a threshold search whose experts all closed before a round still pays for its groups",
          "[cost]") {
  // Every expert's quota is 0 or all its pairs: the search makes no histogram round, but every
  // process still sums its pairs above and at the threshold per (home rank, expert) (Note
  // [Scalable selection]), which the plan must charge as it charges any search's.
  PipelineSettings settings;
  settings.cost_model = CostModel(two_by_two());
  settings.ranks = 4;
  settings.num_experts = 2;
  settings.planning = Planning::Scalable;
  settings.recompute = true;
  PlacementPlan placement;
  placement.instances = {{0, 0, 0, true}, {1, 1, 0, true}};
  placement.quota = {0, 0};
  ForwardPass forward;
  forward.table = std::make_shared<InstanceTable>(build_instance_table(placement, 2, 4, 1, "test"));
  BackwardPass unsearched, searched;
  searched.search_rounds = std::vector<int64_t>{};
  const PlanCollectives none = plan_collectives(settings, forward, unsearched);
  const PlanCollectives closed = plan_collectives(settings, forward, searched);
  // One more all-reduce of 2 x ranks x experts int64: a ring brings each rank 2 (R - 1) / R of it.
  const double groups_bytes = 2.0 * 4 * 2 * 8;
  CHECK(closed.bytes_received - none.bytes_received == Approx(1.5 * groups_bytes));
  CHECK(closed.seconds > none.seconds);
}
