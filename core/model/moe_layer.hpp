#pragma once
// A Mixture-of-Experts feed-forward layer working on token-expert pairs:
// router -> (token, expert, gate) pairs -> compaction by expert -> grouped GEMM over routed
// SwiGLU experts -> gate-weighted scatter-add, plus optional shared experts that see every token.
// Its expert backward is ExpertPairsFunction's, where a PairBackwardPlanner decides per pair.

#include <torch/torch.h>

#include "core/config/experiment.hpp"
#include "core/model/backward_stopwatch.hpp"
#include "core/model/pair_backward_plan.hpp"
#include "core/model/router.hpp"
#include "core/model/swiglu.hpp"

namespace lrmoe {

struct MoEOutput {
  torch::Tensor hidden;    // same shape as the input
  torch::Tensor aux_loss;  // scalar, coefficients applied
};

class MoELayerImpl : public torch::nn::Module {
 public:
  explicit MoELayerImpl(const ModelConfig& config);
  // x: [..., hidden]
  MoEOutput forward(const torch::Tensor& x);

  // Null keeps every pair (exact backward).
  void set_backward_planner(PairBackwardPlanner planner) { planner_ = std::move(planner); }

  Router& router() { return router_; }
  // Wall time of this layer's forward and backward since the last call.
  double take_seconds();

 private:
  int64_t num_experts_;
  int64_t top_k_;
  Router router_{nullptr};
  torch::Tensor w_gate_up_;  // [experts, 2 * ffn, hidden]
  torch::Tensor w_down_;     // [experts, hidden, ffn]
  SwiGLU shared_{nullptr};
  PairBackwardPlanner planner_;
  BackwardStopwatch backward_clock_;
  double forward_seconds_ = 0;
};
TORCH_MODULE(MoELayer);

}  // namespace lrmoe
