#include "core/model/moe_layer.hpp"

#include <chrono>

#include "core/model/expert_pairs_function.hpp"

namespace lrmoe {

MoELayerImpl::MoELayerImpl(const ModelConfig& c) : num_experts_(c.num_experts), top_k_(c.top_k) {
  router_ = register_module("router", Router(c));
  w_gate_up_ = register_parameter("experts_gate_up", torch::empty({c.num_experts, 2 * c.expert_ffn_size, c.hidden_size}));
  w_down_ = register_parameter("experts_down", torch::empty({c.num_experts, c.hidden_size, c.expert_ffn_size}));
  if (c.shared_experts > 0) {
    shared_ = register_module("shared_experts", SwiGLU(c.hidden_size, c.shared_experts * c.expert_ffn_size));
  }
}

MoEOutput MoELayerImpl::forward(const torch::Tensor& input) {
  const auto started = std::chrono::steady_clock::now();
  auto x = backward_clock_.wrap_input(input).reshape({-1, input.size(-1)});
  const int64_t tokens = x.size(0);

  Routing routing = router_(x);
  // Pair p = token * top_k + slot; sorting by expert makes each expert's pairs contiguous.
  auto pair_tokens = torch::arange(tokens, torch::TensorOptions().dtype(torch::kInt64).device(x.device()))
                         .repeat_interleave(top_k_);
  torch::Tensor order;
  ExpertPairs pairs = compact_pairs_by_expert(pair_tokens, routing.experts.reshape({-1}), num_experts_, &order);
  auto gates = routing.gates.reshape({-1}).index_select(0, order);

  auto out = routed_experts(x, gates, pairs, w_gate_up_, w_down_, planner_ ? &planner_ : nullptr);
  if (shared_) out = out + shared_(x);
  out = backward_clock_.wrap_output(out.view(input.sizes()));

  forward_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return {out, routing.aux_loss};
}

double MoELayerImpl::take_seconds() {
  double seconds = forward_seconds_ + backward_clock_.take_seconds();
  forward_seconds_ = 0;
  return seconds;
}

}  // namespace lrmoe
