// The scalable plan (policies.planning = "scalable", Note [Scalable planning] in docs/notes.md)
// against the exact one, on real processes: with the same policies every process keeps, routes
// and loads exactly the pairs the exact plan does, and the expert computation gives the same
// outputs and gradients (to float rounding: replicas of an expert may take other pairs of a
// group, which only changes the order of sums). Double precision, so the comparison is tight.
// Two metrics: the gate, and the random one, whose draws name each pair the same way whichever
// process scores it. And a variant that keeps every pair on a placement without replicas, where
// the scalable plan keeps each saved pre-activation where it is (Note [Context in place]). The
// forward capacity drops each expert's lowest gates, or as many pairs at random, which both
// plans draw alike. And quota pools (Note [Quotas by score mass]), whose score mass every process
// sums alike.

#include <catch2/catch.hpp>

#include <cstdio>
#include <optional>

#include "core/model/expert_pairs_function.hpp"
#include "core/pipeline/stable_order.hpp"
#include "support/builtin_policies.hpp"
#include "support/in_processes.hpp"
#include "support/scripted_policies.hpp"

using namespace lrmoe;
using lrmoe_test::in_processes;

namespace {

constexpr int64_t kTokens = 10, kHidden = 6, kFfn = 3, kExperts = 6, kTopK = 2, kSlots = 4;
constexpr int64_t kRanksPerProcess = 2;

// The same global batch and weights on every process; each process holds its row shard.
struct Shard {
  int64_t process = 0, processes = 1;
  torch::Tensor x, wgu, wd, gates, probe;  // x, gates (pair order), probe: this process's
  ExpertPairs pairs;

  Shard(int64_t p, int64_t P) : process(p), processes(P) {
    torch::manual_seed(17);
    const int64_t all = kTokens * P;
    const torch::Tensor x_all = torch::randn({all, kHidden}, torch::kFloat64);
    wgu = torch::randn({kExperts, 2 * kFfn, kHidden}, torch::kFloat64);
    wd = torch::randn({kExperts, kHidden, kFfn}, torch::kFloat64);
    const torch::Tensor probe_all = torch::randn({all, kHidden}, torch::kFloat64);
    const torch::Tensor gates_all = torch::rand({all * kTopK}, torch::kFloat64);
    x = x_all.narrow(0, p * kTokens, kTokens);
    probe = probe_all.narrow(0, p * kTokens, kTokens);
    // Two distinct experts per token, skewed towards the low ones.
    std::vector<int64_t> experts;
    for (int64_t t = p * kTokens; t < (p + 1) * kTokens; ++t) {
      const int64_t first = (t * t + t / 3) % kExperts % 4;
      experts.push_back(first);
      experts.push_back((first + 1 + t % (kExperts - 1)) % kExperts);
    }
    torch::Tensor order;
    pairs = compact_pairs_by_expert(torch::arange(kTokens).repeat_interleave(kTopK),
                                    torch::tensor(experts, torch::kInt64), kExperts, &order);
    gates = gates_all.narrow(0, p * kTokens * kTopK, kTokens * kTopK).index_select(0, order);
  }

  torch::Tensor home() const {
    return pairs.tokens.mul(kRanksPerProcess).div(kTokens, "floor") + process * kRanksPerProcess;
  }
};

// What a case varies besides the processes, drops and recomputation. `metric`: "gate" (the
// scripted default) or a built-in metric plugin's name; `keep_all`: the selection keeps every
// pair, and no expert has a replica; `pooled`: the unreplicated experts share their quotas.
struct Variant {
  std::string metric;
  bool keep_all = false;
  bool pooled = false;
};

// Owners spread over the ranks, replicas of the two busiest experts on the last ranks (unless
// `keep_all`); quotas of about half each expert's pairs (all of them if `keep_all`), and optionally
// a forward capacity of about three quarters, past which `drop` drops.
PlacementPlan skewed_plan(const PlacementRequest& request, std::optional<ForwardDrop> drop,
                          const Variant& variant) {
  const bool keep_all = variant.keep_all;
  PlacementPlan plan;
  std::vector<int64_t> slot(static_cast<std::size_t>(request.ranks), 0);
  for (int64_t e = 0; e < request.num_experts; ++e) {
    const int64_t rank = e % request.ranks;
    plan.instances.push_back({e, rank, slot[static_cast<std::size_t>(rank)]++, true});
  }
  if (!keep_all) {
    plan.instances.push_back({0, request.ranks - 1, kSlots - 1, false});
    plan.instances.push_back({1, request.ranks - 2, kSlots - 1, false});
  }
  for (int64_t count : request.counts) {
    plan.quota.push_back(keep_all ? count : (count + 1) / 2);
    if (drop) plan.forward_capacity.push_back((3 * count + 3) / 4);
  }
  plan.forward_drop = drop.value_or(ForwardDrop::LowestGate);
  // Experts 0 and 1 have replicas; the others share their quotas.
  if (variant.pooled) {
    for (int64_t e = 0; e < request.num_experts; ++e)
      plan.quota_pool.push_back(e < 2 ? kNoQuotaPool : 0);
  }
  return plan;
}

struct Outcome {
  torch::Tensor out, x, gates, wgu, wd;  // weight gradients summed over processes
  LayerStepStatistics statistics;
};

Outcome run(const Shard& shard, Collectives& collectives, Planning planning,
            std::optional<ForwardDrop> drop, bool recompute, const Variant& variant) {
  const std::string& metric = variant.metric;
  const bool keep_all = variant.keep_all;
  auto policies = lrmoe_test::scripted_policies([drop, variant](const PlacementRequest& request) {
    return skewed_plan(request, drop, variant);
  });
  if (metric != "gate") policies->metric = lrmoe_test::load<MetricPolicy>(metric);
  auto selection = keep_all ? lrmoe_test::load<SelectionPolicy>("keep_all")
                            : lrmoe_test::load<SelectionPolicy>("quota_topk", {{"rescale", true}});
  auto routing = lrmoe_test::load<RoutingPolicy>("capacity_aware");
  policies->selection = selection;
  policies->ranked_selection = std::dynamic_pointer_cast<RankedSelectionPolicy>(selection);
  policies->routing = routing;
  policies->count_routing = std::dynamic_pointer_cast<CountRoutingPolicy>(routing);

  ModelConfig model;
  model.hidden_size = kHidden;
  model.expert_ffn_size = kFfn;
  PipelineSettings settings;
  settings.num_experts = kExperts;
  settings.top_k = kTopK;
  settings.ranks = kRanksPerProcess * shard.processes;
  settings.slots_per_rank = kSlots;
  settings.budget_bytes = int64_t{1} << 30;
  settings.recompute = recompute;
  settings.costs = pair_costs(model, recompute, {8, 8});
  settings.planning = planning;
  settings.process = ProcessView{shard.process, shard.processes, kRanksPerProcess};
  auto pipeline = std::make_shared<ExpertPipeline>(
      policies, settings, std::shared_ptr<Collectives>(&collectives, [](Collectives*) {}));

  auto x = shard.x.clone().requires_grad_(true), wgu = shard.wgu.clone().requires_grad_(true);
  auto wd = shard.wd.clone().requires_grad_(true), g = shard.gates.clone().requires_grad_(true);
  pipeline->set_step(1);
  auto pass = pipeline->plan_forward(shard.pairs.experts, g.detach(), shard.home(), kTokens);
  auto out = routed_experts(x, g.index_select(0, pass->local_pairs),
                            shard.pairs.tokens.index_select(0, pass->local_pairs), wgu, wd,
                            pipeline, pass);
  (out * shard.probe).sum().backward();
  Outcome outcome{out.detach(),       x.grad(),          g.grad(),
                  wgu.grad().clone(), wd.grad().clone(), pipeline->take_statistics()};
  collectives.sum(outcome.wgu);
  collectives.sum(outcome.wd);
  return outcome;
}

bool close(const char* what, const torch::Tensor& a, const torch::Tensor& b) {
  const double difference = a.sizes() == b.sizes() ? (a - b).abs().max().item<double>() : 1e9;
  if (difference <= 1e-12) return true;
  std::fprintf(stderr, "%s differs by %g\n", what, difference);
  return false;
}

bool same(const char* what, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a == b) return true;
  std::fprintf(stderr, "%s differ\n", what);
  return false;
}

// Both plans on this process's shard; whether they agree (what differs goes to stderr).
bool plans_agree(Collectives& c, std::optional<ForwardDrop> drop, bool recompute,
                 const Variant& variant) {
  const bool keep_all = variant.keep_all;
  const Shard shard(c.rank(), c.size());
  // The identity order of every pair of the batch, taken first: the count this thread shares
  // among its identity orders covers all the plans ask for, so it does not grow, and whatever
  // they write into one in place shows here.
  const int64_t pairs = kTokens * kTopK * c.size();
  const torch::Tensor shared = identity_order(pairs, torch::kInt64);
  const Outcome exact = run(shard, c, Planning::Exact, drop, recompute, variant);
  const Outcome scalable = run(shard, c, Planning::Scalable, drop, recompute, variant);
  const LayerStepStatistics& a = exact.statistics;
  const LayerStepStatistics& b = scalable.statistics;
  // Whether the selection drops some, as the variant says.
  bool ok = (a.pairs_kept < a.pairs_routed - a.pairs_dropped) != keep_all;
  if (keep_all && !recompute) {
    // The saved pre-activations stayed in place: the plan charged what it charges when they are
    // recomputed, no context move.
    const Outcome recomputed = run(shard, c, Planning::Scalable, drop, true, variant);
    ok = ok && b.plan.bytes_received == recomputed.statistics.plan.bytes_received &&
         b.plan.seconds == recomputed.statistics.plan.seconds;
  }
  ok = ok && (a.pairs_dropped > 0) == drop.has_value();
  if (drop == ForwardDrop::Random) {
    // As many pairs dropped as by lowest gate, but others: the outputs differ.
    const Outcome by_gate =
        run(shard, c, Planning::Exact, ForwardDrop::LowestGate, recompute, variant);
    ok = ok && by_gate.statistics.pairs_dropped == a.pairs_dropped &&
         !by_gate.out.allclose(exact.out);
  }
  if (variant.pooled) {
    // The pools move quota between their experts, never the number kept.
    const Outcome unpooled = run(shard, c, Planning::Exact, drop, recompute,
                                 Variant{variant.metric, variant.keep_all, false});
    ok = ok && unpooled.statistics.pairs_kept == a.pairs_kept;
    // With three processes' pairs the masses part from the counts: other pairs are kept.
    if (c.size() == 3) ok = ok && !unpooled.wd.allclose(exact.wd);
  }
  ok = ok && a.pairs_routed == b.pairs_routed && a.pairs_dropped == b.pairs_dropped &&
       a.pairs_kept == b.pairs_kept;
  ok = same("forward loads", a.forward_load, b.forward_load) && ok;
  ok = same("backward loads", a.backward_load, b.backward_load) && ok;
  ok = same("bytes sent", a.bytes_sent, b.bytes_sent) && ok;
  ok = close("outputs", exact.out, scalable.out) && ok;
  ok = close("input gradients", exact.x, scalable.x) && ok;
  ok = close("gate gradients", exact.gates, scalable.gates) && ok;
  ok = close("gate-up gradients", exact.wgu, scalable.wgu) && ok;
  ok = close("down gradients", exact.wd, scalable.wd) && ok;
  // Both plans, forward and backward, left the identity orders they share as they were.
  ok = shared.equal(torch::arange(pairs, torch::kInt64)) && ok;
  return ok;
}

}  // namespace

TEST_CASE("The scalable plan keeps, routes and computes on every process what the exact plan does",
          "[pipeline][distributed]") {
  for (const Variant& variant : {Variant{"gate", false, false}, Variant{"random", false, false},
                                 Variant{"gate", true, false}, Variant{"gate", false, true}}) {
    const std::string& metric = variant.metric;
    const bool keep_all = variant.keep_all;
    for (const int64_t processes : {1, 2, 3}) {
      for (const std::optional<ForwardDrop> drop :
           {std::optional<ForwardDrop>(), std::optional(ForwardDrop::LowestGate),
            std::optional(ForwardDrop::Random)}) {
        // Random drops need no other metric or selection beside them.
        if (drop == ForwardDrop::Random && (metric != "gate" || keep_all)) continue;
        for (const bool recompute : {false, true}) {
          INFO("metric " << metric << ", keep all " << keep_all << ", pooled " << variant.pooled
                         << ", " << processes << " processes, forward capacity " << drop.has_value()
                         << " dropping "
                         << (drop == ForwardDrop::Random ? "at random" : "lowest gates")
                         << ", recompute " << recompute);
          if (processes == 1) {
            Collectives single;
            CHECK(plans_agree(single, drop, recompute, variant));
            continue;
          }
          const std::vector<int> codes = in_processes(
              processes, [&](Collectives& c) { return plans_agree(c, drop, recompute, variant); });
          CHECK(codes == std::vector<int>(static_cast<std::size_t>(processes), 0));
        }
      }
    }
  }
}
