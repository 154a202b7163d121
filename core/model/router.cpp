#include "core/model/router.hpp"

namespace lrmoe {

RouterImpl::RouterImpl(const ModelConfig& config) : config_(config) {
  weight_ = register_parameter("weight", torch::empty({config.num_experts, config.hidden_size}));
  selection_bias_ =
      register_buffer("selection_bias", torch::zeros({config.num_experts}, torch::kFloat32));
  step_counts_ = torch::zeros({config.num_experts}, torch::kInt64);
}

Routing RouterImpl::forward(const torch::Tensor& x) {
  const auto math_dtype = x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto logits = torch::nn::functional::linear(x.to(math_dtype), weight_.to(math_dtype));

  // Scores that become gates, and the per-token distribution the balancing loss looks at.
  torch::Tensor scores, distribution;
  if (config_.router == RouterKind::Softmax) {
    scores = torch::softmax(logits, -1);
    distribution = scores;
  } else {
    scores = torch::sigmoid(logits);
    distribution = scores / scores.sum(-1, /*keepdim=*/true);
  }

  // The selection bias only decides which experts are picked; it is zero unless the
  // aux-loss-free update is on.
  auto choice = scores.detach() + selection_bias_.to(math_dtype);
  auto experts = std::get<1>(choice.topk(config_.top_k, -1));
  auto gates = scores.gather(1, experts);
  // As transformers' Qwen3-MoE and GLM-4.5 do, also with one expert: its gate is then 1.
  if (config_.norm_topk) gates = gates / (gates.sum(-1, true) + 1e-20);
  if (config_.routed_scaling_factor != 1.0) gates = gates * config_.routed_scaling_factor;

  Routing routing{experts, gates, torch::Tensor(), torch::zeros({}, logits.options())};
  if (config_.aux_loss_coef > 0) routing.mean_distribution = distribution.mean(0);
  if (config_.z_loss_coef > 0)
    routing.z_loss = config_.z_loss_coef * torch::logsumexp(logits, -1).pow(2).mean();
  return routing;
}

torch::Tensor RouterImpl::aux_loss(const Routing& routing, const torch::Tensor& routed,
                                   int64_t batch_tokens) const {
  if (!routing.mean_distribution.defined()) return routing.z_loss;
  const torch::Tensor& mean = routing.mean_distribution;
  auto fraction = routed.to(mean.device(), mean.scalar_type()) /
                  static_cast<double>(batch_tokens * config_.top_k);
  return routing.z_loss +
         config_.aux_loss_coef * static_cast<double>(config_.num_experts) * (fraction * mean).sum();
}

void RouterImpl::count_step(const torch::Tensor& routed) {
  // The counts live where the router's parameters do (they are no buffer, so module.to() does
  // not move them): the trainer reads them with the step's other figures in one device copy,
  // and the selection bias they update is on that device too.
  if (step_counts_.device() != weight_.device()) step_counts_ = step_counts_.to(weight_.device());
  step_counts_ += routed.to(step_counts_.device());
}

torch::Tensor RouterImpl::take_step_counts() {
  auto counts = step_counts_.clone();
  step_counts_.zero_();
  return counts;
}

void RouterImpl::update_selection_bias(const torch::Tensor& step_counts) {
  if (config_.bias_update_rate <= 0) return;
  torch::NoGradGuard no_grad;
  auto counts = step_counts.to(torch::kFloat32);
  auto step = config_.bias_update_rate * torch::sign(counts.mean() - counts);
  selection_bias_ += step;
  selection_bias_ -= selection_bias_.mean();
}

}  // namespace lrmoe
