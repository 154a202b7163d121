#pragma once
// A Mixture-of-Experts feed-forward layer working on token-expert pairs:
// router -> (token, expert, gate) pairs -> compaction by expert -> grouped GEMM over routed
// SwiGLU experts -> gate-weighted scatter-add, plus optional shared experts that see every token.
// In training, an ExpertPipeline (core/pipeline) runs the LRMoE forward and backward phases over
// R logical ranks; without one, or in evaluation, the layer is exact on one rank.

#include <torch/torch.h>

#include <optional>

#include "core/config/model_config.hpp"
#include "core/device/span_timer.hpp"
#include "core/model/backward_stopwatch.hpp"
#include "core/model/fetched_experts.hpp"
#include "core/model/router.hpp"
#include "core/model/swiglu.hpp"
#include "core/pipeline/expert_fetch_plan.hpp"
#include "core/pipeline/expert_pipeline.hpp"

namespace lrmoe {

struct MoEOutput {
  torch::Tensor hidden;    // same shape as the input
  torch::Tensor aux_loss;  // scalar, coefficients applied
};

class MoELayerImpl : public torch::nn::Module {
 public:
  // Every expert's state, as a single process or a replicated run holds it.
  explicit MoELayerImpl(const ModelConfig& config);
  // Only `shard`'s experts (docs/ARCHITECTURE.md, "Expert-sharded state"): in training the others
  // its ranks host are fetched for each pass (core/model/fetched_experts.hpp), and evaluation
  // computes every pair at its expert's home. Needs a pipeline in training and evaluation.
  MoELayerImpl(const ModelConfig& config, ExpertShard shard);
  // x: [..., hidden]
  MoEOutput forward(const torch::Tensor& x);

  // The experts whose state this layer holds.
  const ExpertShard& shard() const { return shard_; }
  // Draws each held expert's matrices from N(0, std) with a generator of its own, keyed by
  // `layer_seed` and the expert's index alone: an expert's initial weights do not depend on the
  // other experts, so a process that holds some of them draws the same (docs/ARCHITECTURE.md,
  // "Expert-sharded state"). The layer must be on the CPU.
  void initialise_experts(double std, uint64_t layer_seed);
  // The experts' parameters, which initialise_experts draws.
  std::vector<torch::Tensor> expert_parameters() const { return {w_gate_up_, w_down_}; }

  // Null: the exact single-rank layer.
  void set_pipeline(std::shared_ptr<ExpertPipeline> pipeline);
  // The MoE layer after this one (null for the last), whose placement this layer's forward plans
  // ahead and whose replicas it fetches behind its own expert compute where the placement allows
  // (ExpertPipeline::places_ahead, Note [Overlapped expert fetch]). Not owned.
  void set_next(MoELayerImpl* next) { next_ = next; }

  // Waits for the replica gradients this layer's backwards sent home and adds them into its
  // experts' gradients (cluster.overlap_gradient_return, Note [Overlapped expert fetch]); the
  // trainer calls it after the step's last backward, before the gradients are read.
  void finish_gradient_returns() { gradient_returns_->finish(); }

  Router& router() { return router_; }
  // This layer's pipeline statistics and timed forward and backward since the last call (the
  // times alone without a pipeline), the spans unread (LayerStepStatistics::read_times).
  LayerStepStatistics take_statistics();

 private:
  MoELayerImpl(const ModelConfig& config, ExpertShard shard, bool sharded);

  // The layer's weights for one pass, in the compute dtype: the experts held and, sharded in
  // training, those fetched for `pass` (undefined otherwise); and each expert's matrix among held
  // then fetched (empty: matrix e is expert e).
  struct ExpertBank {
    torch::Tensor gate_up, down;
    FetchedExperts fetched;  // with sharded state; its arrival is waited for by the experts
    std::vector<int64_t> index;
  };
  ExpertBank bank_for(const InstanceTable& table, const torch::Tensor& like);
  // In training, before this layer's router: plans its next pass's placement (for `tokens`
  // tokens per process) and, sharded, starts fetching its replicas; they travel behind
  // `cover_seconds` of modeled compute, the previous layer's.
  void prefetch(int64_t tokens, double cover_seconds, const torch::Tensor& like);

  int64_t num_experts_;
  int64_t top_k_;
  ExpertShard shard_;
  bool sharded_;
  Router router_{nullptr};
  torch::Tensor w_gate_up_;  // [shard experts, 2 * ffn, hidden]
  torch::Tensor w_down_;     // [shard experts, hidden, ffn]
  SwiGLU shared_{nullptr};
  std::shared_ptr<ExpertPipeline> pipeline_;
  MoELayerImpl* next_ = nullptr;
  // Fetched by the previous layer's forward for the next pass (prefetch), used by it.
  std::optional<ExpertBank> prefetched_;
  BackwardStopwatch backward_clock_;
  SpanTimer forward_timer_;  // Note [Device timing]
  std::shared_ptr<GradientReturns> gradient_returns_ = std::make_shared<GradientReturns>();
};
TORCH_MODULE(MoELayer);

}  // namespace lrmoe
