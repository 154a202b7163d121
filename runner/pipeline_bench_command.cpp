#include "pipeline_bench_command.hpp"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "core/config/policy_sections.hpp"
#include "core/model/moe_layer.hpp"
#include "core/model/presets.hpp"
#include "core/pipeline/rank_budget.hpp"
#include "core/system/threads.hpp"

namespace lrmoe {
namespace {

struct Variant {
  Variant(std::string name, double fraction) : label(std::move(name)), keep_fraction(fraction) {}
  std::string label;
  double keep_fraction;  // 1: every pair keeps its backward work
  MoELayer layer{nullptr};
  std::shared_ptr<ExpertPipeline> pipeline;
  std::vector<double> seconds;
  PipelineOverhead overhead;
  double layer_seconds = 0;
  int64_t kept = 0, routed = 0;
};

Experiment bench_experiment(const PipelineBenchOptions& o, double keep_fraction) {
  Experiment e;
  e.model = *find_preset("tiny-moe");
  e.model.hidden_size = o.hidden;
  e.model.expert_ffn_size = o.expert_ffn;
  e.model.num_experts = o.experts;
  e.model.top_k = o.top_k;
  e.model.shared_experts = 0;
  e.cluster.ranks = o.ranks;
  e.cluster.slots_per_rank = o.experts / o.ranks + 2;  // room for replicas
  e.policies.bundle = PolicyBundle::Lrmoe;
  apply_bundle(e.policies);
  e.policies.placement.settings["keep_fraction"] = {keep_fraction, "bench-pipeline"};
  return e;
}

// A router that prefers some experts, as trained routers do: a shared direction in the inputs
// that the router's rows pick up with falling strength.
void skew_router(MoELayer& layer, const torch::Tensor& direction) {
  torch::NoGradGuard no_grad;
  auto weight = layer->router()->named_parameters()["weight"];
  const int64_t experts = weight.size(0);
  for (int64_t e = 0; e < experts; ++e) {
    weight[e] += 3.0 * (1.0 - static_cast<double>(e) / static_cast<double>(experts)) * direction;
  }
}

}  // namespace

int pipeline_bench_command(const PipelineBenchOptions& o) {
  configure_threads(0);
  torch::manual_seed(0);
  auto direction = torch::randn({o.hidden});
  direction /= direction.norm();
  auto x = torch::randn({o.tokens, o.hidden}) + 0.8 * direction;
  auto probe = torch::randn({o.tokens, o.hidden});

  std::vector<Variant> variants{{"keep all", 1.0}, {"quota 50%", 0.5}, {"quota 25%", 0.25}};
  for (Variant& v : variants) {
    const Experiment e = bench_experiment(o, v.keep_fraction);
    torch::manual_seed(1);  // the same weights for every variant
    v.layer = MoELayer(e.model);
    for (auto& p : v.layer->parameters()) {
      torch::NoGradGuard no_grad;
      p.normal_(0, 0.05);
    }
    skew_router(v.layer, direction);
    auto policies = std::make_shared<const PolicySet>(load_policy_set(e.policies));
    const RankBudget budget = rank_budget(e.model, e.train, e.cluster, pair_costs(e.model, false));
    const CostModel cost_model(load_hardware_profile(e.cluster.profile, hardware_profile_dirs()));
    v.pipeline = std::make_shared<ExpertPipeline>(policies, pipeline_settings(e, e.model, 0, budget, cost_model),
                                                  std::make_shared<Collectives>());
    v.layer->set_pipeline(v.pipeline);
  }

  auto pass = [&](Variant& v, int64_t step) {
    v.pipeline->set_step(step);
    const auto started = std::chrono::steady_clock::now();
    auto xv = x.clone().requires_grad_(true);
    (v.layer->forward(xv).hidden * probe).sum().backward();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    LayerStepStatistics stats = v.layer->take_statistics();
    v.layer->zero_grad();
    return std::make_pair(seconds, stats);
  };
  for (Variant& v : variants) pass(v, 1);  // warm-up
  for (int64_t round = 0; round < o.rounds; ++round) {
    for (Variant& v : variants) {
      auto [seconds, stats] = pass(v, round + 2);
      v.seconds.push_back(seconds);
      v.overhead += stats.overhead;
      v.layer_seconds += stats.forward_seconds + stats.backward_seconds;
      v.kept += stats.pairs_kept;
      v.routed += stats.pairs_routed;
    }
  }

  fmt::print("MoE layer           {} tokens, hidden {}, {} experts of ffn {}, top-{}, {} logical ranks, {} rounds\n",
             o.tokens, o.hidden, o.experts, o.expert_ffn, o.top_k, o.ranks, o.rounds);
  fmt::print("policies            lrmoe placement (keep_fraction varies), grad_contribution, quota_topk, "
             "capacity_aware\n\n");
  fmt::print("{:<12} {:>8} {:>12} {:>9} | overhead % of layer time: {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}\n", "variant",
             "kept", "fwd+bwd ms", "ratio", "place", "metric", "select", "route", "compact", "total");
  std::sort(variants.front().seconds.begin(), variants.front().seconds.end());
  const double baseline = variants.front().seconds[variants.front().seconds.size() / 2];
  for (Variant& v : variants) {
    std::sort(v.seconds.begin(), v.seconds.end());
    const double median = v.seconds[v.seconds.size() / 2];
    auto share = [&](double s) { return 100.0 * s / v.layer_seconds; };
    fmt::print("{:<12} {:>7.1f}% {:>12.1f} {:>9.3f} | {:>33.2f} {:>7.2f} {:>7.2f} {:>7.2f} {:>7.2f} {:>7.2f}\n", v.label,
               100.0 * static_cast<double>(v.kept) / static_cast<double>(v.routed), 1e3 * median, median / baseline,
               share(v.overhead.placement), share(v.overhead.metric), share(v.overhead.selection),
               share(v.overhead.routing), share(v.overhead.compaction), share(v.overhead.total()));
  }
  return 0;
}

}  // namespace lrmoe
