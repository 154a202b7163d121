#include "core/pipeline/rank_budget.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/config/experiment.hpp"
#include "core/config/memory_spec.hpp"
#include "core/config/parameter_count.hpp"

namespace lrmoe {

int64_t dense_activation_bytes(const ModelConfig& model, int64_t tokens, int64_t seq_len) {
  const int64_t h = model.hidden_size, q = model.num_heads * model.head_dim,
                kv = model.num_kv_heads * model.head_dim;
  const int64_t attention = 4 * h + 2 * (q + 2 * kv) + model.num_heads * seq_len + q;
  const int64_t dense_layers = model.first_k_dense,
                moe_layers = model.num_layers - model.first_k_dense;
  const int64_t dense_ffn = 3 * model.dense_ffn_size;
  const int64_t moe_block =
      2 * model.num_experts + 3 * model.shared_experts * model.expert_ffn_size;
  const int64_t per_token = model.num_layers * attention + dense_layers * dense_ffn +
                            moe_layers * moe_block + 2 * h + 2 * model.vocab_size;
  return per_token * tokens * static_cast<int64_t>(sizeof(float));
}

RankBudget rank_budget(const ModelConfig& model, const TrainConfig& train,
                       const ClusterConfig& cluster, const PairCosts& costs) {
  const int64_t moe_layers = model.num_layers - model.first_k_dense;
  const int64_t routed_parameters =
      moe_layers * model.num_experts * costs.expert_bytes / costs.element_bytes;
  const int64_t dense_parameters = count_parameters(model).total - routed_parameters;
  // Tokens are sharded over the ranks; activations live for one micro-batch at a time.
  const int64_t rank_tokens =
      (train.batch_size * train.seq_len + cluster.ranks - 1) / cluster.ranks;
  RankBudget budget;
  budget.dense_bytes =
      4 * dense_parameters * costs.element_bytes +  // parameter, gradient, two moments
      dense_activation_bytes(model, rank_tokens, train.seq_len);
  const int64_t owned_per_rank = model.num_experts / cluster.ranks;
  budget.optimizer_bytes = moe_layers * owned_per_rank * 2 * costs.expert_bytes;
  // Fixed ownership at balanced load: every rank owns E/R experts and computes and keeps its
  // share of each micro-batch's pairs.
  const double balanced_pairs =
      static_cast<double>(train.batch_size * train.seq_len * model.top_k) /
      static_cast<double>(cluster.ranks);
  const LayerHolding fixed{owned_per_rank, 0, balanced_pairs, balanced_pairs};
  const int64_t fixed_moe =
      moe_layers * static_cast<int64_t>(std::ceil(layer_peak_bytes(costs.memory, fixed)));
  budget.fixed_need_bytes = budget.dense_bytes + budget.optimizer_bytes + fixed_moe;
  const MemorySpec spec = parse_memory_spec(cluster.memory_per_rank);
  budget.memory_per_rank =
      spec.bytes > 0
          ? static_cast<int64_t>(spec.bytes)
          : budget.dense_bytes + budget.optimizer_bytes +
                static_cast<int64_t>(std::floor(spec.times_fixed * static_cast<double>(fixed_moe)));
  const int64_t left = budget.memory_per_rank - budget.dense_bytes - budget.optimizer_bytes;
  if (moe_layers == 0) return budget;
  if (left <= 0) {
    throw PlanError(fmt::format(
        "cluster.memory_per_rank ({} bytes) does not even hold the dense state and "
        "activations ({} bytes) and the owned experts' optimizer state ({} bytes); raise it",
        budget.memory_per_rank, budget.dense_bytes, budget.optimizer_bytes));
  }
  budget.layer_bytes = left / moe_layers;
  return budget;
}

PipelineSettings pipeline_settings(const Experiment& experiment, const ModelConfig& model,
                                   int64_t layer, const RankBudget& budget,
                                   const CostModel& cost_model) {
  const ClusterConfig& cluster = experiment.cluster;
  PipelineSettings settings;
  settings.layer = layer;
  settings.num_experts = model.num_experts;
  settings.top_k = model.top_k;
  settings.ranks = cluster.ranks;
  settings.slots_per_rank =
      cluster.slots_per_rank > 0 ? cluster.slots_per_rank : model.num_experts / cluster.ranks;
  settings.budget_bytes = budget.layer_bytes;
  settings.recompute = experiment.policies.recompute;
  settings.costs = pair_costs(model, settings.recompute);
  settings.dropped_pair_keeps = experiment.policies.dropped_pair_keeps;
  settings.check_plugin_outputs = experiment.policies.check_plugin_outputs;
  settings.seed = experiment.experiment.seed;
  settings.cost_model = cost_model;
  return settings;
}

}  // namespace lrmoe
