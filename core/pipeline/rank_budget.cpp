#include "core/pipeline/rank_budget.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/config/experiment.hpp"
#include "core/config/memory_spec.hpp"
#include "core/config/parameter_count.hpp"
#include "lrmoe/static_owners.hpp"

namespace lrmoe {
namespace {

// Sizes no machine holds (train.seq_len = 1e9: attention probabilities of 1e18 entries per
// sequence) would overflow int64 byte counts and slip past the budget check as garbage. The
// estimates are made in double and refused above 1 EiB, before anything is allocated.
constexpr double kLargestBytes = 0x1p60;

int64_t checked_bytes(double bytes, const char* what) {
  if (!(bytes <= kLargestBytes)) {
    throw PlanError(
        fmt::format("{} would take {:.3g} bytes per rank, more than any machine holds; lower "
                    "train.batch_size, train.seq_len or the model's dimensions",
                    what, bytes));
  }
  return static_cast<int64_t>(std::ceil(bytes));
}

}  // namespace

int64_t dense_activation_bytes(const ModelConfig& model, int64_t tokens, int64_t seq_len,
                               int64_t element_bytes) {
  const auto d = [](int64_t value) { return static_cast<double>(value); };
  const double h = d(model.hidden_size), q = d(model.num_heads) * d(model.head_dim),
               kv = d(model.num_kv_heads) * d(model.head_dim);
  const double dense_layers = d(model.first_k_dense), moe_layers = d(moe_layer_count(model)),
               equivalent_layers = d(model.num_layers - model.first_k_dense) - moe_layers;
  // In the compute dtype: norms, projections, attention output, dense and shared FFNs.
  const double attention = 4 * h + 2 * (q + 2 * kv) + q;
  const double dense_ffn = 3 * d(model.dense_ffn_size);
  const double shared_ffn = 3 * d(model.shared_experts) * d(model.expert_ffn_size);
  const double computed = d(model.num_layers) * attention + dense_layers * dense_ffn +
                          moe_layers * shared_ffn +
                          equivalent_layers * 3 * d(dense_equivalent_width(model)) + 2 * h;
  // In fp32 whatever the precision: attention probabilities, the router's logits and
  // probabilities, the logits and their softmax.
  const double fp32 = d(model.num_layers) * d(model.num_heads) * d(seq_len) +
                      moe_layers * 2 * d(model.num_experts) + 2 * d(model.vocab_size);
  return checked_bytes((computed * d(element_bytes) + fp32 * 4) * d(tokens),
                       "the activations outside the experts");
}

RankBudget rank_budget(const ModelConfig& model, const TrainConfig& train,
                       const ClusterConfig& cluster, const PairCosts& costs,
                       OptimizerState optimizer_state) {
  const int64_t moe_layers = moe_layer_count(model);
  const int64_t routed_parameters =
      moe_layers * model.num_experts * costs.expert_bytes / costs.element_bytes.parameter;
  const int64_t dense_parameters = count_parameters(model).total - routed_parameters;
  // Tokens are sharded over the ranks; activations live for one micro-batch at a time.
  const double batch_tokens =
      static_cast<double>(train.batch_size) * static_cast<double>(train.seq_len);
  const auto rank_tokens =
      checked_bytes(batch_tokens / static_cast<double>(cluster.ranks), "a micro-batch's tokens");
  RankBudget budget;
  budget.dense_bytes =
      4 * dense_parameters * costs.element_bytes.parameter +  // parameter, gradient, two moments
      dense_activation_bytes(model, rank_tokens, train.seq_len, costs.element_bytes.activation);
  // The busiest owner: E/R experts, or one when there are more ranks than experts.
  const int64_t owned_per_rank = owned_experts_per_rank(model.num_experts, cluster.ranks);
  const int64_t owned_optimizer_bytes = moe_layers * owned_per_rank * 2 * costs.expert_bytes;
  // Fixed ownership at balanced load: every owner computes and keeps its experts' share of each
  // micro-batch's pairs (top_k * tokens / R when R divides E).
  const double balanced_pairs = batch_tokens * static_cast<double>(model.top_k) *
                                static_cast<double>(owned_per_rank) /
                                static_cast<double>(std::max<int64_t>(1, model.num_experts));
  const LayerHolding fixed{owned_per_rank, 0, balanced_pairs, balanced_pairs};
  const int64_t fixed_moe =
      checked_bytes(static_cast<double>(moe_layers) * layer_peak_bytes(costs.memory, fixed),
                    "the MoE layers' experts and token buffers");
  budget.fixed_need_bytes = budget.dense_bytes + owned_optimizer_bytes + fixed_moe;
  const MemorySpec spec = parse_memory_spec(cluster.memory_per_rank);
  budget.memory_per_rank =
      spec.bytes > 0
          ? static_cast<int64_t>(spec.bytes)
          : budget.dense_bytes + owned_optimizer_bytes +
                static_cast<int64_t>(std::floor(spec.times_fixed * static_cast<double>(fixed_moe)));
  // In host memory, each rank holds its share of every expert's state (SYMI partitions it over
  // all ranks), as much as an owner holds on its device.
  (optimizer_state == OptimizerState::Host ? budget.host_optimizer_bytes : budget.optimizer_bytes) =
      owned_optimizer_bytes;
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
                                   const HardwareProfile& profile) {
  const ClusterConfig& cluster = experiment.cluster;
  PipelineSettings settings;
  settings.layer = layer;
  settings.num_experts = model.num_experts;
  settings.top_k = model.top_k;
  settings.ranks = cluster.ranks;
  settings.slots_per_rank = cluster.slots_per_rank > 0
                                ? cluster.slots_per_rank
                                : owned_experts_per_rank(model.num_experts, cluster.ranks);
  settings.budget_bytes = budget.layer_bytes;
  settings.recompute = experiment.policies.recompute;
  settings.overlap_expert_fetch = cluster.overlap_expert_fetch;
  settings.overlap_gradient_return = cluster.overlap_gradient_return;
  settings.exchange_chunks = cluster.exchange_chunks;
  settings.costs = pair_costs(model, experiment);
  settings.dropped_pair_keeps = experiment.policies.dropped_pair_keeps;
  settings.host_optimizer_state = experiment.policies.optimizer_state == OptimizerState::Host;
  settings.check_plugin_outputs = experiment.policies.check_plugin_outputs;
  settings.planning = experiment.policies.planning;
  settings.seed = experiment.experiment.seed;
  settings.cost_model = CostModel(profile, CostOptions{cluster.modeled_all_to_all});
  return settings;
}

}  // namespace lrmoe
