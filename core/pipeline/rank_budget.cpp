#include "core/pipeline/rank_budget.hpp"

#include <fmt/format.h>

#include "core/model/parameter_count.hpp"

namespace lrmoe {

RankBudget rank_budget(const ModelConfig& model, const ClusterConfig& cluster, const PairCosts& costs) {
  const int64_t moe_layers = model.num_layers - model.first_k_dense;
  const int64_t routed_parameters = moe_layers * model.num_experts * costs.expert_bytes / costs.element_bytes;
  const int64_t dense_parameters = count_parameters(model).total - routed_parameters;
  RankBudget budget;
  budget.dense_bytes = 4 * dense_parameters * costs.element_bytes;  // parameter, gradient, two moments
  budget.optimizer_bytes = moe_layers * (model.num_experts / cluster.ranks) * 2 * costs.expert_bytes;
  const int64_t left = static_cast<int64_t>(cluster.memory_per_rank) - budget.dense_bytes - budget.optimizer_bytes;
  if (moe_layers == 0) return budget;
  if (left <= 0) {
    throw PlanError(fmt::format("cluster.memory_per_rank ({} bytes) does not even hold the dense state ({} bytes) "
                                "and the owned experts' optimizer state ({} bytes); raise it",
                                cluster.memory_per_rank, budget.dense_bytes, budget.optimizer_bytes));
  }
  budget.layer_bytes = left / moe_layers;
  return budget;
}

PipelineSettings pipeline_settings(const Experiment& experiment, const ModelConfig& model, int64_t layer,
                                   const RankBudget& budget, double gemm_flops) {
  const ClusterConfig& cluster = experiment.cluster;
  PipelineSettings settings;
  settings.layer = layer;
  settings.num_experts = model.num_experts;
  settings.top_k = model.top_k;
  settings.ranks = cluster.ranks;
  settings.slots_per_rank = cluster.slots_per_rank > 0 ? cluster.slots_per_rank : model.num_experts / cluster.ranks;
  settings.budget_bytes = budget.layer_bytes;
  settings.recompute = experiment.policies.recompute;
  settings.costs = pair_costs(model, settings.recompute);
  settings.dropped_pair_keeps = experiment.policies.dropped_pair_keeps;
  settings.seed = experiment.experiment.seed;
  settings.cost_model.flops = cluster.gemm_flops > 0 ? cluster.gemm_flops : gemm_flops;
  settings.cost_model.bandwidth = static_cast<double>(cluster.link_bandwidth);
  settings.cost_model.latency = cluster.link_latency;
  return settings;
}

}  // namespace lrmoe
