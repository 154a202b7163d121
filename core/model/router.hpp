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
// In a multi-process run each process routes its own tokens; the counts behind the balancing
// loss's routed shares and behind the bias update are summed over all processes in training, so
// every process's loss and bias are those of the whole batch (Note [Exact multi-process plan] in
// docs/notes.md).

#include <torch/torch.h>

#include <memory>

#include "core/config/model_config.hpp"
#include "core/distributed/collectives.hpp"

namespace lrmoe {

struct Routing {
  torch::Tensor experts;   // [tokens, top_k] int64
  torch::Tensor gates;     // [tokens, top_k] router dtype, differentiable
  torch::Tensor aux_loss;  // scalar: load-balancing + z-loss, already multiplied by coefficients
};

class RouterImpl : public torch::nn::Module {
 public:
  explicit RouterImpl(const ModelConfig& config);
  // x: [tokens, hidden]
  Routing forward(const torch::Tensor& x);

  // Pairs routed to each expert since the last take_step_counts(): [experts] int64.
  torch::Tensor take_step_counts();
  // Aux-loss-free balancing: bias += rate * sign(mean count - count), re-centred to zero mean.
  void update_selection_bias(const torch::Tensor& step_counts);
  const torch::Tensor& selection_bias() const { return selection_bias_; }
  // The processes whose counts training sums (none: this process alone).
  void set_collectives(std::shared_ptr<Collectives> collectives) {
    collectives_ = std::move(collectives);
  }

 private:
  ModelConfig config_;
  torch::Tensor weight_;          // [experts, hidden]
  torch::Tensor selection_bias_;  // [experts] float32 buffer, never receives gradients
  torch::Tensor step_counts_;     // [experts] int64, accumulated over the step's micro-batches
  std::shared_ptr<Collectives> collectives_;
};
TORCH_MODULE(Router);

}  // namespace lrmoe
