#pragma once
// Causal grouped-query self-attention with RoPE, optional QK RMSNorm and optional QKV bias.

#include <torch/torch.h>

#include "core/config/model_config.hpp"
#include "core/model/rms_norm.hpp"
#include "core/model/rotary_embedding.hpp"

namespace lrmoe {

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelConfig& config);
  // x: [batch, seq, hidden] -> [batch, seq, hidden]
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t num_heads_;
  int64_t num_kv_heads_;
  int64_t head_dim_;
  torch::nn::Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, o_proj_{nullptr};
  RMSNorm q_norm_{nullptr}, k_norm_{nullptr};
  RotaryEmbedding rope_;
};
TORCH_MODULE(Attention);

}  // namespace lrmoe
