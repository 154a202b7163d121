#include "core/model/transformer.hpp"

#include <limits>
#include <set>
#include <string>

#include "core/model/mixed_precision.hpp"
#include "lrmoe/counter_random.hpp"

namespace lrmoe {

BlockImpl::BlockImpl(const ModelConfig& c, int64_t dense_width, std::optional<ExpertShard> shard) {
  attention_norm_ = register_module("attention_norm", RMSNorm(c.hidden_size, c.rms_eps));
  attention_ = register_module("attention", Attention(c));
  ffn_norm_ = register_module("ffn_norm", RMSNorm(c.hidden_size, c.rms_eps));
  if (dense_width > 0) {
    dense_ffn_ = register_module("dense_ffn", SwiGLU(c.hidden_size, dense_width));
  } else {
    moe_ = register_module("moe", shard ? MoELayer(c, *shard) : MoELayer(c));
  }
}

MoEOutput BlockImpl::forward(const torch::Tensor& x) {
  auto h = x + attention_(attention_norm_(x));
  auto normed = ffn_norm_(h);
  if (dense_ffn_) return {h + dense_ffn_(normed), torch::zeros({}, x.options())};
  MoEOutput moe = moe_(normed);
  return {h + moe.hidden, moe.aux_loss};
}

TransformerImpl::TransformerImpl(const ModelConfig& c, std::optional<ExpertShard> shard) {
  // Drawn before any module draws its own default initialisation, so that it depends on the
  // seed alone, not on the model's shapes (an expert's weights then do not depend on E).
  const auto expert_seed = static_cast<uint64_t>(
      torch::randint(std::numeric_limits<int64_t>::max(), {1}, torch::kInt64).item<int64_t>());
  embedding_ = register_module("embedding", torch::nn::Embedding(c.vocab_size, c.hidden_size));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const int64_t dense_width = i < c.first_k_dense ? c.dense_ffn_size
                                : c.moe_as_dense    ? dense_equivalent_width(c)
                                                    : 0;
    blocks_.push_back(register_module("block" + std::to_string(i), Block(c, dense_width, shard)));
    if (dense_width == 0) {
      moe_layers_.push_back(blocks_.back()->moe());
      moe_layer_indices_.push_back(i);
    }
  }
  for (std::size_t l = 0; l + 1 < moe_layers_.size(); ++l)
    moe_layers_[l]->set_next(moe_layers_[l + 1].get());
  final_norm_ = register_module("final_norm", RMSNorm(c.hidden_size, c.rms_eps));
  if (!c.tie_embeddings) {
    lm_head_ = register_module(
        "lm_head",
        torch::nn::Linear(torch::nn::LinearOptions(c.hidden_size, c.vocab_size).bias(false)));
  }
  initialise(c.init_std, expert_seed);
}

void TransformerImpl::initialise(double std, uint64_t expert_seed) {
  // Matrices from N(0, std); biases zero; norm weights one.
  torch::NoGradGuard no_grad;
  std::set<const void*> experts;
  for (std::size_t l = 0; l < moe_layers_.size(); ++l) {
    moe_layers_[l]->initialise_experts(std, mix64(expert_seed ^ mix64(l + 1)));
    for (const auto& p : moe_layers_[l]->expert_parameters()) experts.insert(p.data_ptr());
  }
  for (auto& item : named_parameters()) {
    auto& p = item.value();
    if (experts.count(p.data_ptr()) > 0) continue;
    if (p.dim() >= 2) {
      p.normal_(0.0, std);
    } else if (item.key().find("norm") == std::string::npos) {
      p.zero_();
    }
  }
}

ModelOutput TransformerImpl::forward(const torch::Tensor& tokens) {
  auto h = embedding_(tokens).to(compute_dtype_);
  auto aux = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat32).device(h.device()));
  for (auto& block : blocks_) {
    MoEOutput out = block(h);
    h = out.hidden;
    aux = aux + out.aux_loss.to(aux.scalar_type());
  }
  h = final_norm_(h);
  auto logits =
      lm_head_ ? linear(h, lm_head_) : torch::matmul(h, as_compute(embedding_->weight, h).t());
  return {logits, aux};
}

}  // namespace lrmoe
