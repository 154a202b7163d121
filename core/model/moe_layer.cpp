#include "core/model/moe_layer.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include "core/model/expert_pairs_function.hpp"
#include "core/model/mixed_precision.hpp"
#include "lrmoe/counter_random.hpp"

namespace lrmoe {

MoELayerImpl::MoELayerImpl(const ModelConfig& c) : num_experts_(c.num_experts), top_k_(c.top_k) {
  router_ = register_module("router", Router(c));
  w_gate_up_ = register_parameter(
      "experts_gate_up", torch::empty({c.num_experts, 2 * c.expert_ffn_size, c.hidden_size}));
  w_down_ = register_parameter("experts_down",
                               torch::empty({c.num_experts, c.hidden_size, c.expert_ffn_size}));
  if (c.shared_experts > 0) {
    shared_ = register_module("shared_experts",
                              SwiGLU(c.hidden_size, c.shared_experts * c.expert_ffn_size));
  }
}

void MoELayerImpl::initialise_experts(double std, uint64_t layer_seed) {
  torch::NoGradGuard no_grad;
  for (int64_t e = 0; e < num_experts_; ++e) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(
        mix64(layer_seed ^ mix64(static_cast<uint64_t>(e))));
    w_gate_up_[e].normal_(0.0, std, generator);
    w_down_[e].normal_(0.0, std, generator);
  }
}

void MoELayerImpl::set_pipeline(std::shared_ptr<ExpertPipeline> pipeline) {
  pipeline_ = std::move(pipeline);
}

MoEOutput MoELayerImpl::forward(const torch::Tensor& input) {
  forward_timer_.start(input.device());
  auto x = backward_clock_.wrap_input(input).reshape({-1, input.size(-1)});
  const int64_t tokens = x.size(0);

  Routing routing = router_(x);
  // Pair p = token * top_k + slot; sorting by expert makes each expert's pairs contiguous, in
  // token order (Note [Pair order] in docs/notes.md).
  auto pair_tokens =
      torch::arange(tokens, torch::TensorOptions().dtype(torch::kInt64).device(x.device()))
          .repeat_interleave(top_k_);
  torch::Tensor order;
  ExpertPairs pairs =
      compact_pairs_by_expert(pair_tokens, routing.experts.reshape({-1}), num_experts_, &order);
  // The router and the plan work in fp32; the experts' outputs are weighted in the compute
  // dtype (Note [Mixed precision]).
  auto gates = routing.gates.reshape({-1}).index_select(0, order);
  const torch::Tensor w_gate_up = as_compute(w_gate_up_, x), w_down = as_compute(w_down_, x);

  torch::Tensor out;
  // The balancing loss's routed counts: the batch's, over every process, in training.
  torch::Tensor routed;
  int64_t batch_tokens = tokens;
  if (pipeline_ && torch::GradMode::is_enabled()) {
    // This process's tokens are sharded contiguously over its logical ranks, as data-parallel
    // batches are: the home ranks of one process holding every token (Note [Exact multi-process
    // plan]).
    const ProcessView& process = pipeline_->settings().process;
    auto home =
        pairs.tokens.mul(process.ranks_per_process).div(tokens, "floor").add(process.first_rank());
    auto pass = pipeline_->plan_forward(pairs.experts, gates, home, tokens);
    // The plan has summed them over the processes: no collective of the router's own.
    routed = torch::tensor(pass->routed_per_expert, torch::kInt64);
    batch_tokens *= process.processes;  // every process routes as many tokens
    out = routed_experts(x, gates.index_select(0, pass->local_pairs).to(x.scalar_type()),
                         pairs.tokens.index_select(0, pass->local_pairs), w_gate_up, w_down,
                         pipeline_, pass);
  } else {
    // Evaluation measures the model, so it computes every pair whatever the training policies.
    out = routed_experts(x, gates.to(x.scalar_type()), pairs.tokens, w_gate_up, w_down, nullptr,
                         single_rank_pass(pairs, num_experts_));
    routed = torch::tensor(pairs.expert_offsets, torch::kInt64).diff();
  }
  if (torch::GradMode::is_enabled()) router_->count_step(routed);
  const torch::Tensor aux_loss = router_->aux_loss(routing, routed, batch_tokens);
  if (shared_) out = out + shared_(x);
  out = backward_clock_.wrap_output(out.view(input.sizes()));

  forward_timer_.stop();
  return {out, aux_loss};
}

LayerStepStatistics MoELayerImpl::take_statistics() {
  LayerStepStatistics statistics = pipeline_ ? pipeline_->take_statistics() : LayerStepStatistics{};
  statistics.spans.forward = forward_timer_.take();
  statistics.spans.backward = backward_clock_.take();
  return statistics;
}

}  // namespace lrmoe
