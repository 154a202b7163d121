#include "pipeline_bench_command.hpp"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "core/config/experiment_loader.hpp"
#include "core/device/cuda_runtime.hpp"
#include "core/model/moe_layer.hpp"
#include "core/pipeline/rank_budget.hpp"
#include "core/system/threads.hpp"
#include "dense_gemm_reference.hpp"
#include "run_command.hpp"

namespace lrmoe {
namespace {

struct PipelineVariant {
  std::string label;  // "keep_fraction=0.5"
  Experiment experiment;
  MoELayer layer{nullptr};
  std::shared_ptr<ExpertPipeline> pipeline;
  std::vector<double> seconds;
  PipelineOverhead overhead;
  double layer_seconds = 0;
  int64_t kept = 0, routed = 0, dropped = 0;
};

// Median of `values` (sorted in place).
double median_of(std::vector<double>& values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The layer's dimensions as an experiment on the tiny-moe preset with the lrmoe bundle, then the
// user's overrides and the variant's value: the loader checks every key and plugin parameter.
std::vector<PipelineVariant> bench_variants(const PipelineBenchOptions& o) {
  const std::string base = fmt::format(
      "[model]\npreset = \"tiny-moe\"\nhidden_size = {}\nexpert_ffn_size = {}\nnum_experts = "
      "{}\ntop_k = {}\n"
      "shared_experts = 0\n[cluster]\nranks = {}\nslots_per_rank = {}\n[policies]\nbundle = "
      "\"lrmoe\"\n",
      // 2 slots for replicas
      o.hidden, o.expert_ffn, o.experts, o.top_k, o.ranks, o.experts / o.ranks + 2);
  const std::size_t equals = o.vary.find('=');
  if (equals == std::string::npos || equals == 0 || equals + 1 == o.vary.size()) {
    throw ConfigError(fmt::format("--vary {}: expected section.key=value1,value2,...", o.vary));
  }
  const std::string key = o.vary.substr(0, equals);
  std::vector<PipelineVariant> variants;
  std::size_t begin = equals + 1;
  while (begin <= o.vary.size()) {
    const std::size_t comma = std::min(o.vary.find(',', begin), o.vary.size());
    const std::string value = o.vary.substr(begin, comma - begin);
    std::vector<std::string> overrides = o.overrides;
    overrides.push_back(key + "=" + value);
    PipelineVariant v;
    v.label = key.substr(key.rfind('.') + 1) + "=" + value;
    v.experiment = load_experiment_text(base, "bench-pipeline", overrides);
    variants.push_back(std::move(v));
    begin = comma + 1;
  }
  return variants;
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
  std::vector<PipelineVariant> variants = bench_variants(o);
  // The resolved experiment, not the options, says what runs: --set may change the dimensions.
  const ModelConfig& model = variants.front().experiment.model;
  for (const PipelineVariant& v : variants) {
    if (v.experiment.model.hidden_size != model.hidden_size) {
      throw ConfigError(
          fmt::format("--vary {}: the variants share one input, so model.hidden_size "
                      "must not vary; set it with --set or --hidden",
                      o.vary));
    }
  }
  torch::manual_seed(0);
  auto direction = torch::randn({model.hidden_size});
  direction /= direction.norm();
  auto x = torch::randn({o.tokens, model.hidden_size}) + 0.8 * direction;
  auto probe = torch::randn({o.tokens, model.hidden_size});
  for (PipelineVariant& v : variants) {
    const Experiment& e = v.experiment;
    torch::manual_seed(1);  // the same weights for every variant
    v.layer = MoELayer(e.model);
    for (auto& p : v.layer->parameters()) {
      torch::NoGradGuard no_grad;
      p.normal_(0, 0.05);
    }
    skew_router(v.layer, direction);
    auto policies = load_located_policy_set(e.policies, "bench-pipeline (variant " + v.label + ")");
    const RankBudget budget = rank_budget(e.model, e.train, e.cluster, pair_costs(e.model, e),
                                          e.policies.optimizer_state);
    const HardwareProfile profile =
        load_hardware_profile(e.cluster.profile, hardware_profile_dirs());
    v.pipeline = std::make_shared<ExpertPipeline>(policies,
                                                  pipeline_settings(e, e.model, 0, budget, profile),
                                                  std::make_shared<Collectives>());
    v.layer->set_pipeline(v.pipeline);
  }

  auto pass = [&](PipelineVariant& v, int64_t step) {
    v.pipeline->set_step(step);
    const auto started = std::chrono::steady_clock::now();
    auto xv = x.clone().requires_grad_(true);
    (v.layer->forward(xv).hidden * probe).sum().backward();
    synchronize(xv.device());
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    LayerStepStatistics stats = v.layer->take_statistics();
    stats.read_times();
    v.layer->zero_grad();
    return std::make_pair(seconds, stats);
  };
  // The GEMM limit, timed in the same rounds: one dense matmul at the layer's shapes.
  DenseGemmReference dense(o.tokens * model.top_k, model.hidden_size, model.expert_ffn_size,
                           x.device(), x.scalar_type());
  std::vector<double> dense_seconds;
  auto time_dense = [&] {
    const auto started = std::chrono::steady_clock::now();
    dense.run();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  time_dense();
  for (PipelineVariant& v : variants) pass(v, 1);  // warm-up
  for (int64_t round = 0; round < o.rounds; ++round) {
    dense_seconds.push_back(time_dense());
    for (PipelineVariant& v : variants) {
      auto [seconds, stats] = pass(v, round + 2);
      v.seconds.push_back(seconds);
      v.overhead += stats.overhead;
      v.layer_seconds += stats.forward_seconds + stats.backward_seconds;
      v.kept += stats.pairs_kept;
      v.routed += stats.pairs_routed;
      v.dropped += stats.pairs_dropped;
    }
  }
  const double dense_gflops = dense.flops() / median_of(dense_seconds) / 1e9;

  fmt::print(
      "MoE layer           {} tokens, hidden {}, {} experts of ffn {}, top-{}, {} logical ranks, "
      "{} rounds\n",
      o.tokens, model.hidden_size, model.num_experts, model.expert_ffn_size, model.top_k,
      variants.front().experiment.cluster.ranks, o.rounds);
  const PoliciesConfig& policies = variants.front().experiment.policies;
  fmt::print("policies            placement {}, metric {}, selection {}, routing {}; varied: {}\n",
             policies.placement.name, policies.metric.name, policies.selection.name,
             policies.routing.name, o.vary);
  fmt::print("dense GEMM          {:.1f} GFLOP/s at the layer's shapes{}\n\n", dense_gflops,
             dense.description());
  fmt::print(
      "{:<20} {:>8} {:>12} {:>9} {:>9} {:>9} | overhead % of layer time: {:>7} {:>7} {:>7} {:>7} "
      "{:>7} {:>7}\n",
      "variant", "kept", "fwd+bwd ms", "ratio", "GFLOP/s", "of dense", "place", "metric", "select",
      "route", "compact", "total");
  const double baseline = median_of(variants.front().seconds);
  // Expert GEMM FLOPs per pair and h*f: 6 in forward (gate, up, down); 12 in backward for a kept
  // pair (weight and input gradients of all three, pre-activations saved).
  const double hf = static_cast<double>(model.hidden_size * model.expert_ffn_size);
  for (PipelineVariant& v : variants) {
    const double median = median_of(v.seconds);
    const auto passes = static_cast<double>(o.rounds);
    const double flops =
        hf *
        (6.0 * static_cast<double>(v.routed - v.dropped) + 12.0 * static_cast<double>(v.kept)) /
        passes;
    auto share = [&](double s) { return 100.0 * s / v.layer_seconds; };
    fmt::print(
        "{:<20} {:>7.1f}% {:>12.1f} {:>9.3f} {:>9.1f} {:>9.3f} | {:>33.2f} {:>7.2f} {:>7.2f} "
        "{:>7.2f} {:>7.2f} {:>7.2f}\n",
        v.label, 100.0 * static_cast<double>(v.kept) / static_cast<double>(v.routed), 1e3 * median,
        median / baseline, flops / median / 1e9, flops / median / 1e9 / dense_gflops,
        share(v.overhead.placement), share(v.overhead.metric), share(v.overhead.selection),
        share(v.overhead.routing), share(v.overhead.compaction), share(v.overhead.total()));
  }
  return 0;
}

}  // namespace lrmoe
