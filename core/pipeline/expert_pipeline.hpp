#pragma once
// The LRMoE pipeline of one MoE layer over R logical expert-parallel ranks (DESIGN.md section 3).
//
// Forward phase (plan_forward): global per-expert counts -> placement policy (instances and
// retention quotas) checked against the rank memory budget -> forward capacity drops, if the
// placement sets any -> routing policy over instances -> compaction by destination instance.
// Backward phase (plan_backward): metric policy scores every computed pair -> selection policy
// keeps pairs within the quotas (with weights) -> routing policy spreads the kept pairs over
// eligible instances with per-rank capacity -> compaction of the kept pairs only.
// The expert computation itself is in core/model/expert_pairs_function.cpp; pair rows move
// between ranks only through the PairExchange seam.

#include <torch/torch.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/config/experiment.hpp"
#include "core/pipeline/cost_model.hpp"
#include "core/pipeline/instance_table.hpp"
#include "core/pipeline/layer_statistics.hpp"
#include "core/pipeline/pair_costs.hpp"
#include "core/pipeline/pair_exchange.hpp"
#include "core/pipeline/pair_layout.hpp"
#include "core/plugins/policy_set.hpp"

namespace lrmoe {

struct PipelineSettings {
  int64_t layer = 0;  // index among the MoE layers
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t ranks = 1;
  int64_t slots_per_rank = 0;
  int64_t budget_bytes = 0;  // per rank for this layer's instances and token buffers
  PairCosts costs;
  bool recompute = false;
  DroppedPairKeeps dropped_pair_keeps = DroppedPairKeeps::Nothing;
  uint64_t seed = 0;
  CostModel cost_model;
};

// What the forward phase decided, for the backward phase of the same pass.
struct ForwardPass {
  int64_t step = 0;
  torch::Tensor computed;               // [n] int64: routed pairs (expert order) computed in forward
  torch::Tensor experts;                // [n] int64 expert of each computed pair, on the layer's device
  std::vector<int64_t> expert_offsets;  // [experts + 1] over the computed pairs
  torch::Tensor home;                   // [n] int64 CPU: home rank of each computed pair
  std::shared_ptr<const InstanceTable> table;
  std::vector<int64_t> quota;
  PairLayout layout;
};

struct BackwardPass {
  torch::Tensor kept;     // [k] int64 indices into the computed pairs, increasing
  torch::Tensor weights;  // [k] float32, or undefined for all 1
  PairLayout layout;      // over the kept pairs
};

class ExpertPipeline {
 public:
  ExpertPipeline(std::shared_ptr<const PolicySet> policies, PipelineSettings settings,
                 std::shared_ptr<PairExchange> exchange);

  // The optimizer step the next passes belong to (from 1).
  void set_step(int64_t step) { step_ = step; }

  // `experts`, `gates`: the routed pairs sorted by expert; `home`: CPU home rank of each pair.
  std::shared_ptr<const ForwardPass> plan_forward(const torch::Tensor& experts, const torch::Tensor& gates,
                                                  const torch::Tensor& home, int64_t tokens);
  // `signals` covers the computed pairs of `forward` (its experts, gates and norms).
  BackwardPass plan_backward(const ForwardPass& forward, PairBatch signals);

  PairExchange& exchange() { return *exchange_; }
  const PipelineSettings& settings() const { return settings_; }
  bool recompute() const { return settings_.recompute; }
  bool dropped_pairs_keep_input_grad() const {
    return settings_.dropped_pair_keeps == DroppedPairKeeps::InputGrad;
  }

  // Called by the layer with its measured wall times.
  void add_seconds(double forward, double backward);
  // The statistics since the last call (one optimizer step's passes), then starts afresh.
  LayerStepStatistics take_statistics();

 private:
  std::vector<RankMemory> rank_memory(const InstanceTable& table, const std::vector<double>& forward_load,
                                      const std::vector<double>& backward_load) const;
  void check_budget(const std::vector<RankMemory>& memory, const InstanceTable& table,
                    const std::vector<double>& forward_load, const std::vector<double>& backward_load,
                    const std::string& stage) const;
  std::vector<int64_t> capacity(const std::vector<RankMemory>& memory, int64_t pair_bytes) const;
  torch::Tensor route(Phase phase, const torch::Tensor& experts, const torch::Tensor& home,
                      const InstanceTable& table, std::vector<int64_t> capacity);
  // `memory`: the pass's per-rank memory, as checked after backward routing.
  void account_pass(const ForwardPass& forward, const BackwardPass& backward, const std::vector<RankMemory>& memory);
  // The plugin name of one policy, for messages.
  const std::string& policy_name(PolicyKind kind) const;

  std::shared_ptr<const PolicySet> policies_;
  PipelineSettings settings_;
  std::shared_ptr<PairExchange> exchange_;
  int64_t step_ = 0;
  std::deque<std::vector<int64_t>> history_;  // earlier counts, oldest first
  LayerStepStatistics statistics_;
};

}  // namespace lrmoe
