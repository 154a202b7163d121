// The LRMoE pipeline inside the expert computation (core/pipeline, expert_pairs_function):
// replicas never change the math, selection changes exactly the expert-side gradients it says,
// gate gradients stay exact (Note [Gradients of dropped pairs] in docs/notes.md), and plans that
// break the contract or the budget are refused.
#include <catch2/catch.hpp>

#include <limits>
#include <stdexcept>
#include <tuple>

#include "core/model/expert_pairs_function.hpp"
#include "core/pipeline/pass_accounting.hpp"
#include "core/pipeline/plugin_output_checks.hpp"
#include "core/plugins/policy_parameters.hpp"
#include "lrmoe/expert_segments.hpp"
#include "support/gpu.hpp"
#include "support/scripted_policies.hpp"
#include "support/tensor_checks.hpp"

using namespace lrmoe;
using lrmoe_test::require_close;
using lrmoe_test::scripted_policies;

namespace {

struct Grads {
  torch::Tensor out, x, gates, wgu, wd;
};

// Eight tokens, two pairs each, over four experts on two ranks (three slots each), double
// precision so that reference comparisons are tight.
struct Problem {
  static constexpr int64_t tokens = 8, hidden = 6, ffn = 3, experts = 4, ranks = 2, slots = 3;
  torch::Tensor x, wgu, wd, gates, probe, order;
  ExpertPairs pairs;

  explicit Problem(std::vector<int64_t> experts_of_pairs = {0, 1, 1, 2, 0, 2, 0, 1, 2, 1, 0, 3, 1,
                                                            0, 2, 0}) {
    torch::manual_seed(5);
    x = torch::randn({tokens, hidden}, torch::kFloat64);
    wgu = torch::randn({experts, 2 * ffn, hidden}, torch::kFloat64);
    wd = torch::randn({experts, hidden, ffn}, torch::kFloat64);
    probe = torch::randn({tokens, hidden}, torch::kFloat64);
    auto pair_tokens = torch::arange(tokens).repeat_interleave(2);
    auto pair_experts = torch::tensor(experts_of_pairs, torch::kInt64);
    pairs = compact_pairs_by_expert(pair_tokens, pair_experts, experts, &order);
    gates = torch::rand({16}, torch::kFloat64).index_select(0, order);
  }

  torch::Tensor home() const { return pairs.tokens.mul(ranks).div(tokens, "floor"); }

  // The same problem with every tensor on `device`.
  Problem on(const torch::Device& device) const {
    Problem moved = *this;
    for (torch::Tensor* t : {&moved.x, &moved.wgu, &moved.wd, &moved.gates, &moved.probe,
                             &moved.order, &moved.pairs.tokens, &moved.pairs.experts}) {
      *t = t->to(device);
    }
    return moved;
  }

  PipelineSettings settings(bool recompute = false) const {
    ModelConfig model;
    model.hidden_size = hidden;
    model.expert_ffn_size = ffn;
    PipelineSettings s;
    s.num_experts = experts;
    s.top_k = 2;
    s.ranks = ranks;
    s.slots_per_rank = slots;
    s.budget_bytes = int64_t{1} << 30;
    s.recompute = recompute;
    s.costs = pair_costs(model, recompute, {8, 8});
    return s;
  }

  // Forward and backward of `probe`-weighted output, through `pipeline` (null: exact).
  Grads run(const std::shared_ptr<ExpertPipeline>& pipeline, const ExpertPairs& p,
            const torch::Tensor& g0) const {
    auto xv = x.clone().requires_grad_(true), wguv = wgu.clone().requires_grad_(true);
    auto wdv = wd.clone().requires_grad_(true), g = g0.clone().requires_grad_(true);
    torch::Tensor out;
    if (pipeline) {
      pipeline->set_step(1);
      auto pass = pipeline->plan_forward(p.experts, g.detach(),
                                         p.tokens.mul(ranks).div(tokens, "floor"), tokens);
      out = routed_experts(xv, g.index_select(0, pass->local_pairs),
                           p.tokens.index_select(0, pass->local_pairs), wguv, wdv, pipeline, pass);
    } else {
      out = routed_experts(xv, g, p.tokens, wguv, wdv, nullptr, single_rank_pass(p, experts));
    }
    (out * probe).sum().backward();
    return {out.detach(), xv.grad(), g.grad(), wguv.grad(), wdv.grad()};
  }
  Grads exact() const { return run(nullptr, pairs, gates); }

  // The exact gradients of a subset of the pairs alone.
  Grads exact_subset(const torch::Tensor& subset) const {
    ExpertPairs p{pairs.tokens.index_select(0, subset), pairs.experts.index_select(0, subset), {}};
    p.expert_offsets =
        compact_pairs_by_expert(p.tokens, p.experts, experts, nullptr).expert_offsets;
    return run(nullptr, p, gates.index_select(0, subset));
  }
};

// Owners 0,1 on rank 0 and 2,3 on rank 1; a replica of expert 0 on rank 1 and of 3 on rank 0.
PlacementPlan replicated_plan(const PlacementRequest& request) {
  PlacementPlan plan;
  plan.instances = {{0, 0, 0, true}, {1, 0, 1, true},  {2, 1, 0, true},
                    {3, 1, 1, true}, {0, 1, 2, false}, {3, 0, 2, false}};
  plan.quota = request.counts;
  return plan;
}

// The i-th pair of an expert goes to its (i mod instances)-th instance.
torch::Tensor round_robin(const RoutingRequest& request) {
  auto out = torch::empty_like(request.experts);
  std::vector<int64_t> seen(request.expert_instances.size(), 0);
  for (int64_t i = 0; i < out.numel(); ++i) {
    const auto& instances = request.expert_instances[request.experts[i].item<int64_t>()];
    out[i] = instances[seen[request.experts[i].item<int64_t>()]++ % instances.size()];
  }
  return out;
}

// Charges a rank's part of a phase one second per pair row: operation counts, not wall time.
struct CountingClock : RankClock {
  void time(int64_t rows, const torch::Device&, SpanTimer& timer,
            const std::function<void()>& work) override {
    work();
    timer.charge(static_cast<double>(rows));
  }
};

// Owners only: experts 0 and 1 on rank 0, 2 and 3 on rank 1.
PlacementPlan owners_plan(const PlacementRequest& request) {
  PlacementPlan plan;
  plan.instances = {{0, 0, 0, true}, {1, 0, 1, true}, {2, 1, 0, true}, {3, 1, 1, true}};
  plan.quota = request.counts;
  return plan;
}

std::shared_ptr<ExpertPipeline> make_pipeline(std::shared_ptr<PolicySet> policies,
                                              PipelineSettings settings) {
  return std::make_shared<ExpertPipeline>(std::move(policies), settings,
                                          std::make_shared<Collectives>());
}

}  // namespace

TEST_CASE("keeping every pair, replicas and routing over them never change the math",
          "[pipeline]") {
  Problem problem;
  auto policies = scripted_policies(replicated_plan);
  lrmoe_test::routing_of(*policies).decide = round_robin;
  for (bool recompute : {false, true}) {
    INFO("recompute " << recompute);
    Grads piped = problem.run(make_pipeline(policies, problem.settings(recompute)), problem.pairs,
                              problem.gates);
    Grads exact = problem.exact();
    require_close(piped.out, exact.out, 1e-12);
    require_close(piped.x, exact.x, 1e-12);
    require_close(piped.gates, exact.gates, 1e-12);
    require_close(piped.wgu, exact.wgu, 1e-12);
    require_close(piped.wd, exact.wd, 1e-12);
  }
}

TEST_CASE("selected pairs get exactly their weighted expert backward and gate gradients stay exact",
          "[pipeline]") {
  Problem problem;
  auto policies = scripted_policies(replicated_plan);
  lrmoe_test::routing_of(*policies).decide = round_robin;
  auto kept = torch::arange(0, 16, 2);
  lrmoe_test::selection_of(*policies).decide = [&](const PairBatch& pairs,
                                                   const at::Tensor& scores) {
    REQUIRE(scores.numel() == 16);
    REQUIRE(pairs.upstream_norm.numel() == 16);
    REQUIRE(pairs.hidden_norm.numel() == 16);
    REQUIRE(pairs.expert_offsets == problem.pairs.expert_offsets);
    return Selection{kept, torch::full({8}, 2.0f)};
  };
  Grads exact = problem.exact();
  Grads kept_only = problem.exact_subset(kept);

  SECTION("a dropped pair loses its weight and input gradients") {
    Grads planned =
        problem.run(make_pipeline(policies, problem.settings()), problem.pairs, problem.gates);
    require_close(planned.wgu, 2 * kept_only.wgu, 1e-12);
    require_close(planned.wd, 2 * kept_only.wd, 1e-12);
    require_close(planned.x, 2 * kept_only.x, 1e-12);
    REQUIRE((planned.wd - exact.wd).abs().max().item<double>() > 1e-3);  // dropping work shows
    require_close(planned.gates, exact.gates, 1e-12);
  }
  SECTION("dropped_pair_keeps = input_grad: input gradients stay exact") {
    PipelineSettings settings = problem.settings();
    settings.dropped_pair_keeps = DroppedPairKeeps::InputGrad;
    for (bool recompute : {false, true}) {
      settings.recompute = recompute;
      Grads planned = problem.run(make_pipeline(policies, settings), problem.pairs, problem.gates);
      require_close(planned.wgu, 2 * kept_only.wgu, 1e-12);
      require_close(planned.wd, 2 * kept_only.wd, 1e-12);
      require_close(planned.x, exact.x, 1e-12);
      require_close(planned.gates, exact.gates, 1e-12);
    }
  }
}

TEST_CASE("a forward capacity computes each expert's highest-gate pairs only", "[pipeline]") {
  Problem problem;
  auto policies = scripted_policies([](const PlacementRequest& request) {
    PlacementPlan plan = replicated_plan(request);
    plan.forward_capacity.assign(4, 2);
    return plan;
  });
  Grads piped =
      problem.run(make_pipeline(policies, problem.settings()), problem.pairs, problem.gates);
  // The two highest gates of each expert, by hand from the offsets.
  std::vector<int64_t> chosen;
  for (int64_t e = 0; e < Problem::experts; ++e) {
    const int64_t begin = problem.pairs.expert_offsets[e],
                  n = problem.pairs.expert_offsets[e + 1] - begin;
    auto top = std::get<1>(problem.gates.narrow(0, begin, n).topk(std::min<int64_t>(2, n))) + begin;
    for (int64_t i = 0; i < top.numel(); ++i) chosen.push_back(top[i].item<int64_t>());
  }
  std::sort(chosen.begin(), chosen.end());
  Grads subset = problem.exact_subset(torch::tensor(chosen, torch::kInt64));
  require_close(piped.out, subset.out, 1e-12);
  require_close(piped.wd, subset.wd, 1e-12);
  // A dropped pair's gate gets no gradient at all: it was not computed.
  REQUIRE(piped.gates.abs().gt(0).sum().item<int64_t>() == static_cast<int64_t>(chosen.size()));
}

TEST_CASE("the pipeline's statistics count loads, bytes and memory of what it did", "[pipeline]") {
  Problem problem;
  auto policies = scripted_policies(replicated_plan);  // owner routing: replicas stay idle
  auto pipeline = make_pipeline(policies, problem.settings());
  problem.run(pipeline, problem.pairs, problem.gates);
  LayerStepStatistics stats = pipeline->take_statistics();

  // Owners: experts 0 and 1 on rank 0, 2 and 3 on rank 1.
  auto rank_of_pair = problem.pairs.experts.ge(2).to(torch::kInt64);
  auto home = problem.home();
  const int64_t to_rank1 = rank_of_pair.sum().item<int64_t>();
  const int64_t crossing = rank_of_pair.ne(home).sum().item<int64_t>();
  const PairCosts& costs = pipeline->settings().costs;
  CHECK(stats.pairs_routed == 16);
  CHECK(stats.pairs_kept == 16);
  CHECK(stats.pairs_dropped == 0);
  CHECK(stats.replicas == 2);
  CHECK(stats.forward_load == std::vector<int64_t>{16 - to_rank1, to_rank1});
  CHECK(stats.backward_load == stats.forward_load);
  CHECK(stats.traffic.forward_dispatch == crossing * costs.row_bytes);
  // The combine carries the hidden norm beside the output row; the backward dispatch the gradient
  // and the input row; the saved context stays put.
  CHECK(stats.traffic.forward_combine ==
        crossing * (costs.row_bytes + costs.element_bytes.activation));
  CHECK(stats.traffic.backward_dispatch == crossing * 2 * costs.row_bytes);
  CHECK(stats.traffic.replica_sync == 2 * 2 * costs.expert_bytes);
  REQUIRE(stats.passes.size() == 1);
  const std::vector<LayerHolding>& held = stats.passes[0];
  REQUIRE(held.size() == 2);
  CHECK(held[0].owned == 2);
  CHECK(held[0].replicas == 1);
  CHECK(held[1].forward_pairs == static_cast<double>(to_rank1));
  CHECK(held[1].backward_pairs == static_cast<double>(to_rank1));
  CHECK(stats.modeled.total() > 0);
  // The default profile makes every rank a node of its own: every byte moved crosses nodes.
  const LayerTraffic& t = stats.traffic;
  CHECK(t.cross_node == t.forward_dispatch + t.forward_combine + t.backward_dispatch +
                            t.backward_return + t.replica_sync);
  // Taking starts afresh.
  CHECK(pipeline->take_statistics().pairs_routed == 0);

  // Both ranks on one node: nothing crosses.
  HardwareProfile one_node;
  one_node.ranks_per_node = 2;
  PipelineSettings settings = problem.settings();
  settings.cost_model = CostModel(one_node);
  auto together = make_pipeline(policies, settings);
  problem.run(together, problem.pairs, problem.gates);
  const LayerStepStatistics on_one_node = together->take_statistics();
  CHECK(on_one_node.traffic.forward_dispatch == t.forward_dispatch);
  CHECK(on_one_node.traffic.cross_node == 0);
}

TEST_CASE("a rank receives an expert's parameters once however many of its instances it hosts",
          "[pipeline]") {
  Problem problem;
  // Expert 0 owned on rank 0 with two instances on rank 1; expert 3 owned on rank 1 with a
  // second instance beside its owner.
  auto plan_with = [](bool share) {
    return [share](const PlacementRequest& request) {
      PlacementPlan plan;
      plan.instances = {{0, 0, 0, true},  {1, 0, 1, true},  {2, 1, 0, true}, {3, 1, 1, true},
                        {0, 1, 2, false}, {3, 1, 3, false}, {0, 1, 4, false}};
      plan.quota = request.counts;
      plan.co_located_share_copy = share;
      return plan;
    };
  };
  PipelineSettings settings = problem.settings();
  settings.slots_per_rank = 5;
  for (const bool share : {false, true}) {
    INFO("co-located instances share a copy: " << share);
    auto pipeline = make_pipeline(scripted_policies(plan_with(share)), settings);
    problem.run(pipeline, problem.pairs, problem.gates);
    const LayerStepStatistics stats = pipeline->take_statistics();
    const PairCosts& costs = pipeline->settings().costs;
    // Out and back once, to rank 1 only: the instance beside expert 3's owner moves nothing.
    CHECK(stats.traffic.replica_sync == 2 * costs.expert_bytes);
    REQUIRE(stats.passes.size() == 1);
    const std::vector<LayerHolding>& held = stats.passes[0];
    CHECK(held[0].replicas == 0);
    // Own copies: each of rank 1's three extra instances holds one; shared: expert 0's one.
    CHECK(held[1].replicas == (share ? 1 : 3));
  }
}

TEST_CASE("an owner away from its expert's home is charged a fetch and a return every pass",
          "[pipeline]") {
  Problem problem;
  int64_t passes = 0;
  // Experts 0 and 1 are homed on rank 0, 2 and 3 on rank 1 (their static owners). The first
  // pass owns every expert at home, later ones own expert 0 on rank 1 and 2 on rank 0.
  auto policies = scripted_policies([&passes](const PlacementRequest& request) {
    PlacementPlan plan;
    if (passes++ == 0) {
      plan.instances = {{0, 0, 0, true}, {1, 0, 1, true}, {2, 1, 0, true}, {3, 1, 1, true}};
    } else {
      plan.instances = {{2, 0, 0, true}, {1, 0, 1, true}, {0, 1, 0, true}, {3, 1, 1, true}};
    }
    plan.quota = request.counts;
    plan.information = PlanInformation::EarlierPasses;
    return plan;
  });
  auto pipeline = make_pipeline(policies, problem.settings());
  const PairCosts& costs = pipeline->settings().costs;
  problem.run(pipeline, problem.pairs, problem.gates);
  LayerStepStatistics first = pipeline->take_statistics();
  CHECK(first.traffic.replica_sync == 0);  // every owner at home moves nothing
  CHECK(first.modeled.replicas == 0);
  problem.run(pipeline, problem.pairs, problem.gates);
  LayerStepStatistics second = pipeline->take_statistics();
  // Experts 0 and 2, each out from home and its gradient back.
  CHECK(second.traffic.replica_sync == 4 * costs.expert_bytes);
  CHECK(second.modeled.replicas > 0);
  CHECK(second.information == PlanInformation::EarlierPasses);
  // Staying away pays again: the optimizer stepped at home, so the weights are new each pass.
  problem.run(pipeline, problem.pairs, problem.gates);
  CHECK(pipeline->take_statistics().traffic.replica_sync == 4 * costs.expert_bytes);
}

TEST_CASE(
    "a placement planned ahead is the plan its pass uses, its fetch modeled behind the compute "
    "it was given",
    "[pipeline]") {
  Problem problem;
  std::vector<std::size_t> counts_seen, history_seen;
  // Experts 0 and 2 owned away from their homes every pass: a fetch and a return each.
  auto policies = scripted_policies([&](const PlacementRequest& request) {
    counts_seen.push_back(request.counts.size());
    history_seen.push_back(request.history.size());
    PlacementPlan plan;
    plan.instances = {{2, 0, 0, true}, {1, 0, 1, true}, {0, 1, 0, true}, {3, 1, 1, true}};
    plan.quota.assign(4, kKeepEveryPair);
    plan.information = PlanInformation::EarlierPasses;
    return plan;
  });
  lrmoe_test::placement_of(*policies).declared = PlanInformation::EarlierPasses;
  std::vector<int64_t> quota_seen;
  lrmoe_test::selection_of(*policies).decide = [&](const PairBatch& pairs, const at::Tensor&) {
    quota_seen = pairs.quota;
    return Selection{torch::arange(pairs.experts.numel(), torch::kInt64), {}};
  };
  // Every message costs a second and bytes nothing: the fetch and the return a second each.
  HardwareProfile profile;
  profile.intra_node_latency = profile.inter_node_latency = 1.0;
  profile.intra_node_bandwidth = profile.inter_node_bandwidth = 1e30;
  PipelineSettings settings = problem.settings();
  settings.cost_model = CostModel(profile);
  auto pipeline = make_pipeline(policies, settings);
  REQUIRE(pipeline->places_ahead());
  const torch::Device cpu(torch::kCPU);

  // Placed after the router (no layer before it): nothing hidden.
  const Grads apart = problem.run(pipeline, problem.pairs, problem.gates);
  const LayerStepStatistics first = pipeline->take_statistics();
  CHECK_FALSE(first.placed_ahead);
  CHECK(first.modeled.overlapped == 0);
  REQUIRE(first.modeled.replicas == Approx(2.0));
  // The quota the selection sees is each expert's count, not kKeepEveryPair.
  CHECK(quota_seen == std::vector<int64_t>{6, 5, 4, 1});

  // Placed ahead, behind more compute than the fetch takes: the fetch is hidden whole; the plan
  // and the math are the same.
  pipeline->place_ahead(Problem::tokens, cpu, 1e9);
  const Grads ahead = problem.run(pipeline, problem.pairs, problem.gates);
  const LayerStepStatistics second = pipeline->take_statistics();
  CHECK(second.placed_ahead);
  CHECK(second.modeled.replicas == first.modeled.replicas);
  CHECK(second.modeled.overlapped == Approx(1.0));
  CHECK(second.modeled.hidden_transfers == Approx(1.0));
  CHECK(second.traffic.replica_sync == first.traffic.replica_sync);
  CHECK(torch::equal(ahead.out, apart.out));
  CHECK(torch::equal(ahead.wgu, apart.wgu));
  CHECK(quota_seen == std::vector<int64_t>{6, 5, 4, 1});
  // Planned without the counts, with the first pass's counts in its history.
  CHECK(counts_seen == std::vector<std::size_t>{4, 0});
  CHECK(history_seen == std::vector<std::size_t>{0, 1});

  // Behind less compute than the fetch takes: that much is hidden.
  pipeline->place_ahead(Problem::tokens, cpu, 0.25);
  problem.run(pipeline, problem.pairs, problem.gates);
  CHECK(pipeline->take_statistics().modeled.overlapped == Approx(0.25));

  // Not overlapping the fetch places nothing ahead.
  PipelineSettings waiting = settings;
  waiting.overlap_expert_fetch = false;
  CHECK_FALSE(make_pipeline(policies, waiting)->places_ahead());
}

TEST_CASE(
    "a chunked pass's compute covers its own chunks only: no fetch behind its forward, and a "
    "return behind what its backward has left",
    "[pipeline]") {
  Problem problem;
  // Compute slow enough to hide a chunk's messages behind: milliseconds per GEMM and message.
  HardwareProfile profile;
  profile.peak_flops = 1e5;
  profile.memory_bandwidth = 1e12;
  profile.intra_node_latency = profile.inter_node_latency = 1e-3;
  profile.intra_node_bandwidth = profile.inter_node_bandwidth = 1e12;
  const auto covers = [&](int64_t chunks) {
    PipelineSettings settings = problem.settings();
    settings.cost_model = CostModel(profile);
    settings.exchange_chunks = chunks;
    auto pipeline = make_pipeline(scripted_policies(replicated_plan), settings);
    pipeline->set_step(1);
    auto pass = pipeline->plan_forward(problem.pairs.experts, problem.gates, problem.home(),
                                       Problem::tokens);
    const double fetch_cover = modeled_fetch_cover(settings, *pass);
    problem.run(pipeline, problem.pairs, problem.gates);
    LayerStepStatistics statistics = pipeline->take_statistics();
    REQUIRE(statistics.pass_returns.size() == 1);  // the run's pass: the one above has no backward
    return std::make_tuple(fetch_cover, statistics.pass_returns.back().backward_cover,
                           statistics.modeled.backward_compute, statistics.modeled.overlapped);
  };
  const auto [fetch_whole, return_whole, backward_whole, hidden_whole] = covers(1);
  CHECK(fetch_whole > 0);
  CHECK(hidden_whole == 0);
  CHECK(return_whole == Approx(backward_whole));  // unchunked: the whole backward compute
  const auto [fetch_chunked, return_chunked, backward_chunked, hidden_chunked] = covers(2);
  CHECK(fetch_chunked == 0);
  REQUIRE(hidden_chunked > 0);
  CHECK(return_chunked < backward_chunked);
  CHECK(return_chunked >= 0);
}

TEST_CASE(
    "with the optimizer state in host memory, each step pays its share of every expert down to "
    "the host and back up over the host link, once whatever its passes",
    "[pipeline][cost]") {
  const Problem problem;
  // Every owner at home: no replica moves, so the parameter transfers are the host link's alone.
  auto policies = scripted_policies([](const PlacementRequest& request) {
    PlacementPlan plan;
    plan.instances = {{0, 0, 0, true}, {1, 0, 1, true}, {2, 1, 0, true}, {3, 1, 1, true}};
    plan.quota = request.counts;
    return plan;
  });
  HardwareProfile profile;
  profile.intra_node_bandwidth = profile.inter_node_bandwidth = 1e30;
  profile.element_bytes = 2;
  // A second per expert's bytes: 3 * hidden * ffn * 2 bytes each.
  profile.host_link_bandwidth = 3.0 * Problem::hidden * Problem::ffn * 2;
  PipelineSettings settings = problem.settings();
  settings.cost_model = CostModel(profile);
  auto on_device = make_pipeline(policies, settings);
  problem.run(on_device, problem.pairs, problem.gates);
  CHECK(on_device->take_statistics().modeled.replicas == 0);

  settings.host_optimizer_state = true;
  // Four experts over two ranks: each rank's host holds two experts' state, down and up.
  CHECK(modeled_host_optimizer_seconds(settings) == Approx(4.0));
  auto on_host = make_pipeline(policies, settings);
  problem.run(on_host, problem.pairs, problem.gates);
  problem.run(on_host, problem.pairs, problem.gates);  // a second micro-batch of the same step
  const LayerStepStatistics step = on_host->take_statistics();
  CHECK(step.passes.size() == 2);
  CHECK(step.modeled.replicas == Approx(4.0));
  CHECK(step.traffic.replica_sync == 0);  // nothing crosses the network
}

TEST_CASE("a placement that plans ahead but says its plan used this pass's counts is refused",
          "[pipeline]") {
  Problem problem;
  auto policies = scripted_policies([](const PlacementRequest&) {
    PlacementPlan plan;
    plan.instances = {{0, 0, 0, true}, {1, 0, 1, true}, {2, 1, 0, true}, {3, 1, 1, true}};
    plan.quota.assign(4, kKeepEveryPair);
    return plan;  // information = ThisPass
  });
  lrmoe_test::placement_of(*policies).declared = PlanInformation::NoCounts;
  auto pipeline = make_pipeline(policies, problem.settings());
  pipeline->set_step(3);
  CHECK_THROWS_WITH(
      pipeline->place_ahead(Problem::tokens, torch::Device(torch::kCPU), 0),
      Catch::Contains("step 3, MoE layer 0, forward, placed ahead: placement 'scripted_placement' "
                      "declares that it plans without this pass's counts"));
}

TEST_CASE("a pass is modeled as four all-to-all calls, the backward's messages as one",
          "[pipeline]") {
  Problem problem;
  // Every message costs a second and bytes nothing: the modeled all-to-all counts calls.
  HardwareProfile profile;
  profile.intra_node_latency = profile.inter_node_latency = 1.0;
  profile.intra_node_bandwidth = profile.inter_node_bandwidth = 1e30;
  PipelineSettings settings = problem.settings();
  settings.cost_model = CostModel(profile);
  // Input gradients for every computed pair: the backward sends out the kept pairs' rows and
  // every computed pair's gradient row, two messages in one call (Note [Fused dispatch]).
  settings.dropped_pair_keeps = DroppedPairKeeps::InputGrad;
  auto pipeline = make_pipeline(scripted_policies(replicated_plan), settings);
  problem.run(pipeline, problem.pairs, problem.gates);
  const LayerStepStatistics stats = pipeline->take_statistics();
  REQUIRE(stats.traffic.forward_dispatch > 0);  // pairs cross ranks both ways in every call
  CHECK(stats.modeled.all_to_all == Approx(4.0).epsilon(1e-9));
}

TEST_CASE("plans and routes that break the contract or the budget are refused with the numbers",
          "[pipeline]") {
  Problem problem;
  SECTION("a plan over the memory budget") {
    auto policies = scripted_policies(replicated_plan);
    PipelineSettings settings = problem.settings();
    // Rank 0's two owned experts and one replica fit (5 expert sizes), its token buffers do not.
    settings.budget_bytes = 6 * settings.costs.expert_bytes;
    REQUIRE_THROWS_WITH(
        problem.run(make_pipeline(policies, settings), problem.pairs, problem.gates),
        Catch::Contains("does not fit rank 0 as planned") && Catch::Contains("3 expert copies") &&
            Catch::Contains("raise cluster.memory_per_rank"));
  }
  SECTION("an expert without an owner") {
    auto policies = scripted_policies([](const PlacementRequest& request) {
      PlacementPlan plan = replicated_plan(request);
      plan.instances[2].owner = false;
      return plan;
    });
    REQUIRE_THROWS_WITH(
        problem.run(make_pipeline(policies, problem.settings()), problem.pairs, problem.gates),
        Catch::Contains("gave expert 2 no owner"));
  }
  SECTION("two instances in one slot") {
    auto policies = scripted_policies([](const PlacementRequest& request) {
      PlacementPlan plan = replicated_plan(request);
      plan.instances[4].slot = 0;
      return plan;
    });
    REQUIRE_THROWS_WITH(
        problem.run(make_pipeline(policies, problem.settings()), problem.pairs, problem.gates),
        Catch::Contains("two instances on rank 1 slot 0"));
  }
  SECTION("a pair routed to another expert's instance") {
    auto policies = scripted_policies(replicated_plan);
    lrmoe_test::routing_of(*policies).decide = [](const RoutingRequest& request) {
      return torch::zeros_like(request.experts);
    };
    REQUIRE_THROWS_WITH(
        problem.run(make_pipeline(policies, problem.settings()), problem.pairs, problem.gates),
        Catch::Contains("routing 'scripted_routing' sent a pair to an instance of another expert"));
  }
  SECTION("a selection that is not increasing") {
    auto policies = scripted_policies(replicated_plan);
    lrmoe_test::selection_of(*policies).decide = [](const PairBatch&, const at::Tensor&) {
      return Selection{torch::tensor({3, 1}, torch::kInt64), {}};
    };
    REQUIRE_THROWS_WITH(
        problem.run(make_pipeline(policies, problem.settings()), problem.pairs, problem.gates),
        Catch::Contains("strictly increasing"));
  }
}

TEST_CASE("plugin answers with bad values are refused naming the plugin, unless checks are off",
          "[pipeline]") {
  Problem problem;
  auto policies = scripted_policies(replicated_plan);
  PipelineSettings settings = problem.settings();
  auto refused = [&](const std::string& why) {
    REQUIRE_THROWS_WITH(
        problem.run(make_pipeline(policies, settings), problem.pairs, problem.gates),
        Catch::Contains(why));
  };
  auto scores_with = [&](float value) {
    lrmoe_test::metric_of(*policies).decide = [value](const PairBatch& pairs) {
      at::Tensor scores = pairs.gates.clone();
      scores[0] = value;
      return scores;
    };
  };
  auto weights_with = [&](float value) {
    lrmoe_test::selection_of(*policies).decide = [value](const PairBatch& pairs,
                                                         const at::Tensor&) {
      at::Tensor weights = torch::ones({pairs.experts.numel()});
      weights[1] = value;
      return Selection{torch::arange(pairs.experts.numel(), torch::kInt64), weights};
    };
  };
  SECTION("a NaN score") {
    scores_with(std::numeric_limits<float>::quiet_NaN());
    refused("metric 'scripted_metric' returned a NaN or infinite score");
  }
  SECTION("an infinite score") {
    scores_with(std::numeric_limits<float>::infinity());
    refused("metric 'scripted_metric' returned a NaN or infinite score");
  }
  SECTION("a negative score") {
    scores_with(-1);
    refused("metric 'scripted_metric' returned a negative score");
  }
  SECTION("no scores at all") {
    lrmoe_test::metric_of(*policies).decide = [](const PairBatch&) { return at::Tensor(); };
    refused("metric 'scripted_metric' returned nothing for");
  }
  SECTION("scores on the meta device, which hold no values") {
    lrmoe_test::metric_of(*policies).decide = [](const PairBatch& pairs) {
      return torch::empty({pairs.experts.numel()}, torch::TensorOptions().device(torch::kMeta));
    };
    refused("metric 'scripted_metric' returned scores on the meta device");
  }
  SECTION("kept pairs on the meta device") {
    lrmoe_test::selection_of(*policies).decide = [](const PairBatch& pairs, const at::Tensor&) {
      return Selection{
          torch::empty({pairs.experts.numel()},
                       torch::TensorOptions().dtype(torch::kInt64).device(torch::kMeta)),
          {}};
    };
    refused("selection 'scripted_selection' returned tensors on the meta device");
  }
  SECTION("where, and from which library") {
    policies->records[1].path = "/plugins/scripted_metric.so";
    scores_with(-1);
    refused(
        "step 1, MoE layer 0, backward: metric 'scripted_metric' (/plugins/scripted_metric.so) "
        "returned a negative score: score must return [pairs] scores, finite and >= 0");
  }
  SECTION("an infinite weight") {
    weights_with(std::numeric_limits<float>::infinity());
    refused("selection 'scripted_selection' returned a NaN or infinite weight");
  }
  SECTION("a negative weight") {
    weights_with(-0.5F);
    refused("selection 'scripted_selection' returned a negative weight");
  }
  SECTION("more kept pairs than an expert's quota") {
    lrmoe_test::placement_of(*policies).decide = [](const PlacementRequest& request) {
      PlacementPlan plan = replicated_plan(request);
      plan.quota[1] = 1;
      return plan;
    };
    // Expert 1 has 5 of the problem's pairs; the scripted selection keeps them all.
    refused("selection 'scripted_selection' kept 5 pairs of expert 1, above its quota of 1");
  }
  SECTION("with policies.check_plugin_outputs off, values pass unchecked") {
    settings.check_plugin_outputs = false;
    scores_with(-1);
    weights_with(-0.5F);
    CHECK_NOTHROW(problem.run(make_pipeline(policies, settings), problem.pairs, problem.gates));
  }
}

TEST_CASE("whatever a plugin throws comes out as one error naming the plugin and the call",
          "[pipeline]") {
  Problem problem;
  auto policies = scripted_policies(replicated_plan);
  SECTION("a std::exception") {
    lrmoe_test::routing_of(*policies).decide = [](const RoutingRequest&) -> torch::Tensor {
      throw std::out_of_range("no such instance");
    };
    REQUIRE_THROWS_WITH(
        problem.run(make_pipeline(policies, problem.settings()), problem.pairs, problem.gates),
        Catch::Contains("the routing plugin 'scripted_routing' (): route failed: no such "
                        "instance; fix the plugin"));
  }
  SECTION("something that is not a std::exception") {
    lrmoe_test::metric_of(*policies).decide = [](const PairBatch&) -> at::Tensor { throw 42; };
    REQUIRE_THROWS_WITH(
        problem.run(make_pipeline(policies, problem.settings()), problem.pairs, problem.gates),
        Catch::Contains("the metric plugin 'scripted_metric' (): score threw something that is "
                        "not a std::exception"));
  }
}

TEST_CASE("experts and ranks without pairs, and experts with a zero quota, work", "[pipeline]") {
  // Every pair goes to experts 0 and 1 (owned by rank 0): rank 1 computes nothing, experts 2
  // and 3 get nothing, and expert 1 keeps no pair in backward.
  Problem problem({0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1, 0, 0, 0});
  auto policies = scripted_policies([](const PlacementRequest& request) {
    PlacementPlan plan = replicated_plan(request);
    plan.quota = {request.counts[0], 0, 0, 0};
    return plan;
  });
  lrmoe_test::selection_of(*policies).decide = [](const PairBatch& pairs, const at::Tensor&) {
    return Selection{torch::arange(pairs.expert_offsets[1], torch::kInt64), {}};
  };
  auto pipeline = make_pipeline(policies, problem.settings());
  Grads piped = problem.run(pipeline, problem.pairs, problem.gates);
  Grads expert0 =
      problem.exact_subset(torch::arange(problem.pairs.expert_offsets[1], torch::kInt64));
  require_close(piped.wd, expert0.wd, 1e-12);
  require_close(piped.wgu, expert0.wgu, 1e-12);
  CHECK(piped.wd.slice(0, 1).abs().max().item<double>() == 0.0);
  require_close(piped.gates, problem.exact().gates, 1e-12);
  const LayerStepStatistics stats = pipeline->take_statistics();
  CHECK(stats.forward_load == std::vector<int64_t>{16, 0});
  CHECK(stats.backward_load[1] == 0);
}

TEST_CASE("importance sampling keeps the expert weight gradient unbiased, top-quota does not",
          "[pipeline]") {
  Problem problem;
  const PluginCatalog catalog = PluginCatalog::discover({LRMOE_BUILTIN_PLUGIN_DIR});
  auto selection = [&](const std::string& name) {
    const PluginInfo& plugin = *catalog.find(PolicyKind::Selection, name);
    return std::static_pointer_cast<SelectionPolicy>(
        create_policy(plugin, resolve_parameters(plugin, {})));
  };
  auto policies = scripted_policies([](const PlacementRequest& request) {
    PlacementPlan plan = replicated_plan(request);
    // half, and never 0 for a routed expert
    for (int64_t& quota : plan.quota) quota = (quota + 1) / 2;
    return plan;
  });
  const torch::Tensor exact = problem.exact().wd;
  auto mean_error = [&](int samples) {
    torch::Tensor sum = torch::zeros_like(exact);
    double single_error = 0;
    for (int i = 0; i < samples; ++i) {
      PipelineSettings settings = problem.settings();
      settings.seed = static_cast<uint64_t>(i);
      const torch::Tensor wd =
          problem.run(make_pipeline(policies, settings), problem.pairs, problem.gates).wd;
      single_error = std::max(single_error, ((wd - exact).norm() / exact.norm()).item<double>());
      sum += wd;
    }
    return std::make_pair(((sum / samples - exact).norm() / exact.norm()).item<double>(),
                          single_error);
  };
  policies->selection = selection("importance_sampling");
  const auto [sampled_mean, sampled_single] = mean_error(2000);
  INFO("importance sampling: relative error of the mean "
       << sampled_mean << ", of one sample up to " << sampled_single);
  CHECK(sampled_single > 0.2);  // one sample is noisy...
  CHECK(sampled_mean < 0.05);   // ...but their mean converges to the exact gradient
  policies->selection = selection("quota_topk");
  const auto [topk_mean, topk_single] = mean_error(2);
  INFO("quota_topk: relative error " << topk_mean);
  CHECK(topk_mean > 0.1);  // deterministic and biased: averaging does not help
}

TEST_CASE("a skewed routing has a longer critical path than a balanced one with the same pairs",
          "[pipeline]") {
  // Sixteen pairs either way; balanced: 8 per rank, skewed: 12 on rank 0 and 4 on rank 1.
  const Problem balanced({0, 2, 1, 3, 0, 2, 1, 3, 0, 2, 1, 3, 0, 2, 1, 3});
  const Problem skewed({0, 1, 0, 1, 0, 1, 0, 1, 0, 2, 1, 3, 0, 2, 1, 3});
  auto path_of = [](const Problem& problem) {
    auto pipeline = make_pipeline(scripted_policies(owners_plan), problem.settings());
    pipeline->set_rank_clock(std::make_shared<CountingClock>());
    problem.run(pipeline, problem.pairs, problem.gates);
    LayerStepStatistics stats = pipeline->take_statistics();
    stats.read_times();
    // One process, nothing but the ranks' counted expert work and no plan: the critical path is
    // the busiest rank's pairs, forward and backward.
    ProcessPhaseTimes process;
    for (int phase = 0; phase < kPhases; ++phase) {
      for (double seconds : stats.rank_expert_seconds[phase]) process.wall[phase] += seconds;
    }
    return critical_path(stats.rank_expert_seconds, {process}, Problem::ranks);
  };
  const CriticalPath even = path_of(balanced);
  const CriticalPath uneven = path_of(skewed);
  CHECK(even.rank_seconds[kForwardPhase] == std::vector<double>{8, 8});
  CHECK(uneven.rank_seconds[kForwardPhase] == std::vector<double>{12, 4});
  CHECK(uneven.rank_seconds[kBackwardPhase] == std::vector<double>{12, 4});
  CHECK(even.rank_sum == uneven.rank_sum);
  CHECK(even.seconds == 16);
  CHECK(uneven.seconds == 24);
}

TEST_CASE(
    "on a GPU the plan stays on the device, host-reading policies get CPU copies, and the "
    "gradients are the CPU's",
    "[gpu]") {
  const auto gpu = lrmoe::test::gpu_or_skip();
  if (!gpu) return;
  const Problem cpu_problem;
  const Problem gpu_problem = cpu_problem.on(*gpu);
  // Metric and selection read on the device, the scripted routing on the host (its record says
  // TensorPlace::Host); each notes where its inputs were.
  auto policies = scripted_policies(replicated_plan);
  std::vector<torch::Device> metric_saw, selection_saw, routing_saw;
  lrmoe_test::routing_of(*policies).decide = [&](const RoutingRequest& request) {
    routing_saw.push_back(request.experts.device());
    return round_robin(request);
  };
  auto& metric = static_cast<lrmoe_test::ScriptedMetric&>(*policies->metric);
  metric.decide = [&](const PairBatch& pairs) {
    metric_saw.push_back(pairs.gates.device());
    return pairs.gates * pairs.upstream_norm;
  };
  lrmoe_test::selection_of(*policies).decide = [&](const PairBatch& pairs,
                                                   const at::Tensor& scores) {
    selection_saw.push_back(scores.device());
    return Selection{highest_scored_per_expert(scores, pairs.experts, pairs.expert_offsets,
                                               std::vector<int64_t>(4, 2)),
                     {}};
  };
  for (bool recompute : {false, true}) {
    INFO("recompute " << recompute);
    const Grads on_cpu = cpu_problem.run(make_pipeline(policies, cpu_problem.settings(recompute)),
                                         cpu_problem.pairs, cpu_problem.gates);
    metric_saw.clear(), selection_saw.clear(), routing_saw.clear();
    const Grads on_gpu = gpu_problem.run(make_pipeline(policies, gpu_problem.settings(recompute)),
                                         gpu_problem.pairs, gpu_problem.gates);
    REQUIRE(metric_saw == std::vector<torch::Device>{*gpu});
    REQUIRE(selection_saw == std::vector<torch::Device>{*gpu});
    REQUIRE(routing_saw == std::vector<torch::Device>(2, torch::kCPU));  // forward and backward
    REQUIRE(on_gpu.wd.device() == *gpu);
    require_close(on_gpu.out.cpu(), on_cpu.out, 1e-9);
    require_close(on_gpu.x.cpu(), on_cpu.x, 1e-9);
    require_close(on_gpu.gates.cpu(), on_cpu.gates, 1e-9);
    require_close(on_gpu.wgu.cpu(), on_cpu.wgu, 1e-9);
    require_close(on_gpu.wd.cpu(), on_cpu.wd, 1e-9);
  }
}

TEST_CASE("NaN scores from NaN inputs are called divergence, with how many and the first value",
          "[pipeline]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const torch::Tensor gates = torch::tensor({0.5F, nan, 0.25F, nan});
  const torch::Tensor scores = gates.clone();
  REQUIRE_THROWS_WITH(
      lrmoe::check_scores(scores, 4, /*values=*/true, "gate", {{"gates", gates}}),
      Catch::Contains("the pairs' gates are NaN or infinite (2 of 4, the first nan): training "
                      "diverged; lower train.lr"));
  // Finite inputs: the metric's own answer is at fault.
  REQUIRE_THROWS_WITH(lrmoe::check_scores(scores, 4, true, "gate", {{"gates", torch::ones({4})}}),
                      Catch::Contains("metric 'gate' returned a NaN or infinite score: score must "
                                      "return [pairs] scores, finite and >= 0"));
}
