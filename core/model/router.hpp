#pragma once
// The MoE router: scores every token against every expert, picks top-k experts per token and the
// gate of each pick. Router math runs in float32 (float64 when the model runs in float64, for
// gradient checks), whatever the model's dtype.
//
//  - softmax (Qwen3): gates are the top-k softmax probabilities, optionally renormalised.
//  - sigmoid (GLM-4.5, DeepSeek-V3): scores are sigmoids; a per-expert selection bias is added
//    for choosing the top-k but never enters the gates; gates are renormalised and multiplied by
//    routed_scaling_factor.
// The selection bias is updated without an auxiliary loss (update_selection_bias), once per
// optimizer step from that step's counts. Auxiliary losses: load balancing (Switch style) and
// router z-loss.
//
// In a multi-process run each process routes its own tokens. The counts behind the balancing
// loss's routed shares and behind the bias update are the whole batch's in training: the MoE
// layer takes them from its pipeline's plan, which sums them over the processes anyway, so the
// router makes no collective of its own (Note [Exact multi-process plan] in docs/notes.md).

#include <torch/torch.h>

#include "core/config/model_config.hpp"

namespace lrmoe {

struct Routing {
  torch::Tensor experts;  // [tokens, top_k] int64
  torch::Tensor gates;    // [tokens, top_k] router dtype, differentiable
  // [experts] router dtype, differentiable: the mean over tokens of the distribution the
  // balancing loss weighs (softmax probabilities, or normalised sigmoid scores)
  torch::Tensor mean_distribution;
  torch::Tensor z_loss;  // scalar, coefficient applied (zero without a z-loss)
};

class RouterImpl : public torch::nn::Module {
 public:
  explicit RouterImpl(const ModelConfig& config);
  // x: [tokens, hidden]
  Routing forward(const torch::Tensor& x);
  // The routing's auxiliary loss (scalar, coefficients applied): Switch-style load balancing,
  // E * sum_e f_e * P_e, with f_e = routed[e] / (batch_tokens * top_k) the batch's share of
  // pairs routed to e (no gradient; `routed` [experts] int64 on any device) and P_e the routing's
  // mean distribution, plus its z-loss. Over processes, give the batch's counts and tokens: the
  // processes' losses then average to the batch's, as P_e does.
  torch::Tensor aux_loss(const Routing& routing, const torch::Tensor& routed,
                         int64_t batch_tokens) const;
  // Adds one micro-batch's routed pairs per expert ([experts] int64, the batch's) to the step's.
  void count_step(const torch::Tensor& routed);

  // Pairs routed to each expert since the last take_step_counts(): [experts] int64, on the
  // router's device.
  torch::Tensor take_step_counts();
  // Aux-loss-free balancing: bias += rate * sign(mean count - count), re-centred to zero mean.
  void update_selection_bias(const torch::Tensor& step_counts);
  const torch::Tensor& selection_bias() const { return selection_bias_; }

 private:
  ModelConfig config_;
  torch::Tensor weight_;          // [experts, hidden]
  torch::Tensor selection_bias_;  // [experts] float32 buffer, never receives gradients
  torch::Tensor step_counts_;     // [experts] int64 on weight_'s device, summed over micro-batches
};
TORCH_MODULE(Router);

}  // namespace lrmoe
