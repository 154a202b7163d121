#pragma once
// How a rank's memory (cluster.memory_per_rank) divides: the data-parallel dense state and
// activations and the optimizer state of the experts it owns (unless that lives in host memory,
// Note [Optimizer state in host memory]) come first; what is left is shared equally by the MoE
// layers, each of which plans its instances and token buffers within its share (Note [Memory
// model] in docs/notes.md).

#include <cstdint>

#include "core/config/cluster_config.hpp"
#include "core/config/model_config.hpp"
#include "core/config/policies_config.hpp"
#include "core/config/train_config.hpp"
#include "core/pipeline/expert_pipeline.hpp"

namespace lrmoe {

struct Experiment;

struct RankBudget {
  // Dense parameters, gradients and Adam state (float32), and the activations autograd keeps for
  // the rank's share of a micro-batch outside the experts (an estimate from the dimensions,
  // dense_activation_bytes).
  int64_t dense_bytes = 0;
  // Adam state of the experts a rank owns, all MoE layers, in device memory: 0 when it lives in
  // host memory
  int64_t optimizer_bytes = 0;
  // The same state's bytes in the rank's host memory (its share of every expert's), or 0
  int64_t host_optimizer_bytes = 0;
  int64_t layer_bytes = 0;  // per MoE layer: instances and token buffers
  // What fixed ownership needs per rank at balanced load (every owner computing and keeping its
  // ceil(E/R) experts' share of each micro-batch's pairs), dense and optimizer state included:
  // the unit of memory_per_rank = "<f>x fixed" (Note [Memory model]).
  int64_t fixed_need_bytes = 0;
  int64_t memory_per_rank = 0;  // cluster.memory_per_rank resolved to bytes
};

// Throws PlanError, with the numbers, when nothing is left for the MoE layers, and when the
// sizes give byte counts above 1 EiB per rank (which int64 arithmetic would overflow). "<f>x
// fixed" is in units of fixed ownership's need with its optimizer state on the device, wherever
// `optimizer_state` puts this run's.
RankBudget rank_budget(const ModelConfig& model, const TrainConfig& train,
                       const ClusterConfig& cluster, const PairCosts& costs,
                       OptimizerState optimizer_state);

// Bytes of the activations autograd saves for `tokens` tokens outside the routed experts (whose
// token buffers the pipeline counts): per layer the norms' inputs and outputs, queries, keys and
// values before and after RoPE, the attention probabilities, the attention output, the router's
// logits and probabilities, dense and shared FFN activations; then the final norm and the logits
// with their softmax. `element_bytes` is the compute dtype's; the attention probabilities, the
// router's and the logits' tensors are fp32 at any precision (Note [Mixed precision]).
int64_t dense_activation_bytes(const ModelConfig& model, int64_t tokens, int64_t seq_len,
                               int64_t element_bytes);

// The settings of MoE layer `layer` (index among the MoE layers), modeled on `profile` with the
// experiment's cost options.
PipelineSettings pipeline_settings(const Experiment& experiment, const ModelConfig& model,
                                   int64_t layer, const RankBudget& budget,
                                   const HardwareProfile& profile);

}  // namespace lrmoe
