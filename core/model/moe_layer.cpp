#include "core/model/moe_layer.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include "core/model/expert_pairs_function.hpp"
#include "core/model/fetched_experts.hpp"
#include "core/model/mixed_precision.hpp"
#include "core/pipeline/home_pass.hpp"
#include "core/pipeline/pass_accounting.hpp"
#include "lrmoe/counter_random.hpp"

namespace lrmoe {

MoELayerImpl::MoELayerImpl(const ModelConfig& c)
    : MoELayerImpl(c, ExpertShard{0, c.num_experts}, /*sharded=*/false) {}

MoELayerImpl::MoELayerImpl(const ModelConfig& c, ExpertShard shard)
    : MoELayerImpl(c, shard, /*sharded=*/true) {}

MoELayerImpl::MoELayerImpl(const ModelConfig& c, ExpertShard shard, bool sharded)
    : num_experts_(c.num_experts), top_k_(c.top_k), shard_(shard), sharded_(sharded) {
  router_ = register_module("router", Router(c));
  w_gate_up_ = register_parameter(
      "experts_gate_up", torch::empty({shard.count, 2 * c.expert_ffn_size, c.hidden_size}));
  w_down_ = register_parameter("experts_down",
                               torch::empty({shard.count, c.hidden_size, c.expert_ffn_size}));
  if (c.shared_experts > 0) {
    shared_ = register_module("shared_experts",
                              SwiGLU(c.hidden_size, c.shared_experts * c.expert_ffn_size));
  }
}

void MoELayerImpl::initialise_experts(double std, uint64_t layer_seed) {
  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < shard_.count; ++i) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(
        mix64(layer_seed ^ mix64(static_cast<uint64_t>(shard_.first + i))));
    w_gate_up_[i].normal_(0.0, std, generator);
    w_down_[i].normal_(0.0, std, generator);
  }
}

MoELayerImpl::ExpertBank MoELayerImpl::bank_for(const InstanceTable& table,
                                                const torch::Tensor& like) {
  if (!sharded_) return {as_compute(w_gate_up_, like), as_compute(w_down_, like), {}, {}};
  const PipelineSettings& settings = pipeline_->settings();
  auto plan = std::make_shared<const ExpertFetchPlan>(
      plan_expert_fetch(table, num_experts_, settings.ranks, settings.process));
  std::vector<int64_t> index = plan->bank_index;
  // Passed on even when nothing was fetched: every process's fetch must take part in the
  // backward's return exchange, so its outputs stay in the graph.
  FetchedExperts fetched =
      fetch_experts(w_gate_up_, w_down_, std::move(plan), pipeline_->collectives(),
                    like.scalar_type(), &pipeline_->parameter_transfers(),
                    settings.overlap_gradient_return ? gradient_returns_ : nullptr);
  // Not overlapped: the experts arrive before the pairs leave.
  if (!settings.overlap_expert_fetch) fetched.arrival->wait();
  return {as_compute(w_gate_up_, like), as_compute(w_down_, like), std::move(fetched),
          std::move(index)};
}

void MoELayerImpl::prefetch(int64_t tokens, double cover_seconds, const torch::Tensor& like) {
  auto table = pipeline_->place_ahead(tokens, like.device(), cover_seconds);
  // Replicated expert state fetches nothing: the placement is planned ahead all the same, so
  // that the plan and its modeled time do not depend on where the state lives.
  if (sharded_) prefetched_ = bank_for(*table, like);
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

  torch::Tensor out;
  // The balancing loss's routed counts: the batch's, over every process, in training.
  torch::Tensor routed;
  int64_t batch_tokens = tokens;
  // This process's tokens are sharded contiguously over its logical ranks, as data-parallel
  // batches are: the home ranks of one process holding every token (Note [Exact multi-process
  // plan]).
  auto home_ranks = [&] {
    const ProcessView& process = pipeline_->settings().process;
    return pairs.tokens.mul(process.ranks_per_process)
        .div(tokens, "floor")
        .add(process.first_rank());
  };
  if (pipeline_ && torch::GradMode::is_enabled()) {
    const ProcessView& process = pipeline_->settings().process;
    auto pass = pipeline_->plan_forward(pairs.experts, gates, home_ranks(), tokens);
    // The plan has summed them over the processes: no collective of the router's own.
    routed = torch::tensor(pass->routed_per_expert, torch::kInt64);
    batch_tokens *= process.processes;  // every process routes as many tokens
    ExpertBank bank = prefetched_ ? std::move(*prefetched_) : bank_for(*pass->table, x);
    prefetched_.reset();
    // The next layer's replicas travel behind this layer's expert compute: started once this
    // layer's pairs have left, so that on one stream (NCCL) they do not delay them.
    std::function<void()> after_dispatch;
    if (next_ && next_->pipeline_ && next_->pipeline_->places_ahead()) {
      after_dispatch = [this, tokens, &pass, &x] {
        // It runs inside this layer's autograd function, whose forward LibTorch runs without
        // grad mode: the fetch must enter the graph, or the replicas' gradients never go home.
        torch::AutoGradMode in_training(true);
        next_->prefetch(tokens, modeled_fetch_cover(pipeline_->settings(), *pass), x);
      };
    }
    out = routed_experts(x, gates.index_select(0, pass->local_pairs).to(x.scalar_type()),
                         pairs.tokens.index_select(0, pass->local_pairs), bank.gate_up, bank.down,
                         pipeline_, pass, std::move(bank.index), std::move(bank.fetched),
                         std::move(after_dispatch));
  } else {
    // Evaluation measures the model, so it computes every pair whatever the training policies:
    // sharded, each at its expert's home; otherwise here.
    const auto pass =
        sharded_ ? home_pass(pairs.experts, home_ranks(), num_experts_, pipeline_->settings().ranks,
                             pipeline_->settings().process, *pipeline_->collectives())
                 : single_rank_pass(pairs, num_experts_);
    std::vector<int64_t> index;
    for (int64_t e = 0; sharded_ && e < num_experts_; ++e)
      index.push_back(shard_.holds(e) ? e - shard_.first : -1);
    out = routed_experts(x, gates.to(x.scalar_type()), pairs.tokens, as_compute(w_gate_up_, x),
                         as_compute(w_down_, x), sharded_ ? pipeline_ : nullptr, pass,
                         std::move(index));
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
