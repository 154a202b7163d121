#include "core/model/attention.hpp"

#include "core/model/mixed_precision.hpp"

#include <cmath>
#include <limits>

namespace lrmoe {

AttentionImpl::AttentionImpl(const ModelConfig& c)
    : num_heads_(c.num_heads),
      num_kv_heads_(c.num_kv_heads),
      head_dim_(c.head_dim),
      rope_(c.head_dim, c.partial_rotary, c.rope_theta) {
  using torch::nn::LinearOptions;
  q_proj_ = register_module(
      "q_proj",
      torch::nn::Linear(LinearOptions(c.hidden_size, c.num_heads * c.head_dim).bias(c.qkv_bias)));
  k_proj_ = register_module(
      "k_proj", torch::nn::Linear(
                    LinearOptions(c.hidden_size, c.num_kv_heads * c.head_dim).bias(c.qkv_bias)));
  v_proj_ = register_module(
      "v_proj", torch::nn::Linear(
                    LinearOptions(c.hidden_size, c.num_kv_heads * c.head_dim).bias(c.qkv_bias)));
  o_proj_ = register_module(
      "o_proj",
      torch::nn::Linear(LinearOptions(c.num_heads * c.head_dim, c.hidden_size).bias(false)));
  if (c.qk_norm) {
    q_norm_ = register_module("q_norm", RMSNorm(c.head_dim, c.rms_eps));
    k_norm_ = register_module("k_norm", RMSNorm(c.head_dim, c.rms_eps));
  }
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  const int64_t batch = x.size(0);
  const int64_t seq = x.size(1);
  auto q = linear(x, q_proj_).view({batch, seq, num_heads_, head_dim_}).transpose(1, 2);
  auto k = linear(x, k_proj_).view({batch, seq, num_kv_heads_, head_dim_}).transpose(1, 2);
  auto v = linear(x, v_proj_).view({batch, seq, num_kv_heads_, head_dim_}).transpose(1, 2);
  if (q_norm_) {
    q = q_norm_(q);
    k = k_norm_(k);
  }
  q = rope_.apply(q);
  k = rope_.apply(k);
  if (num_kv_heads_ != num_heads_) {
    // Each KV head serves num_heads / num_kv_heads consecutive query heads.
    const int64_t group = num_heads_ / num_kv_heads_;
    k = k.repeat_interleave(group, 1);
    v = v.repeat_interleave(group, 1);
  }
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim_));
  auto future =
      torch::ones({seq, seq}, torch::TensorOptions().dtype(torch::kBool).device(x.device()))
          .triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  // The softmax in fp32 whatever the compute dtype: its sums are where bf16 loses most.
  auto probabilities = torch::softmax(scores, -1, torch::kFloat32).to(v.scalar_type());
  auto attended = torch::matmul(probabilities, v);  // [batch, heads, seq, head_dim]
  return linear(attended.transpose(1, 2).reshape({batch, seq, num_heads_ * head_dim_}), o_proj_);
}

}  // namespace lrmoe
