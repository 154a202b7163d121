#include "core/config/parameter_count.hpp"

namespace lrmoe {

ParameterCount count_parameters(const ModelConfig& c) {
  const int64_t h = c.hidden_size;
  const int64_t q_dim = c.num_heads * c.head_dim;
  const int64_t kv_dim = c.num_kv_heads * c.head_dim;

  int64_t attention = h * q_dim + 2 * h * kv_dim + q_dim * h;
  if (c.qkv_bias) attention += q_dim + 2 * kv_dim;
  if (c.qk_norm) attention += 2 * c.head_dim;
  const int64_t block_norms = 2 * h;
  const int64_t swiglu_per_width = 3 * h;  // gate, up and down projections per FFN unit

  const int64_t dense_ffn = swiglu_per_width * c.dense_ffn_size;
  const int64_t one_expert = swiglu_per_width * c.expert_ffn_size;
  const int64_t router = c.num_experts * h;
  const int64_t shared = c.shared_experts * one_expert;

  // Layers after the first first_k_dense that are dense of the MoE's active width.
  const int64_t equivalent_layers = c.moe_as_dense ? c.num_layers - c.first_k_dense : 0;
  const int64_t dense_layers = c.first_k_dense;
  const int64_t moe_layers = moe_layer_count(c);

  const int64_t embedding = c.vocab_size * h;
  const int64_t head = c.tie_embeddings ? 0 : c.vocab_size * h;
  const int64_t common =
      dense_layers * (attention + block_norms + dense_ffn) +
      equivalent_layers * (attention + block_norms + swiglu_per_width * dense_equivalent_width(c)) +
      moe_layers * (attention + block_norms + router + shared) + h /* final norm */;

  ParameterCount count;
  count.total = embedding + head + common + moe_layers * c.num_experts * one_expert;
  // A tied head is the embedding matrix, used as a matmul by the head.
  count.active = (c.tie_embeddings ? embedding : head) + common + moe_layers * c.top_k * one_expert;
  return count;
}

int64_t routed_expert_parameters(const ModelConfig& c) {
  return moe_layer_count(c) * 3 * c.hidden_size * c.expert_ffn_size;
}

}  // namespace lrmoe
