#pragma once
// How a rank's memory (cluster.memory_per_rank) divides: the data-parallel dense state and the
// optimizer state of the experts it owns come first; what is left is shared equally by the MoE
// layers, each of which plans its instances and token buffers within its share.

#include <cstdint>

#include "core/config/experiment.hpp"
#include "core/pipeline/expert_pipeline.hpp"

namespace lrmoe {

struct RankBudget {
  int64_t dense_bytes = 0;      // dense parameters, gradients and Adam state (float32)
  int64_t optimizer_bytes = 0;  // Adam state of the experts a rank owns, all MoE layers
  int64_t layer_bytes = 0;      // per MoE layer: instances and token buffers
};

// Throws PlanError, with the numbers, when nothing is left for the MoE layers.
RankBudget rank_budget(const ModelConfig& model, const ClusterConfig& cluster, const PairCosts& costs);

// The settings of MoE layer `layer` (index among the MoE layers). `gemm_flops` calibrates the
// cost model when cluster.gemm_flops is 0.
PipelineSettings pipeline_settings(const Experiment& experiment, const ModelConfig& model, int64_t layer,
                                   const RankBudget& budget, double gemm_flops);

}  // namespace lrmoe
