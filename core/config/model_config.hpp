#pragma once
// The [model] section of an experiment: the transformer and its MoE layers. Field meanings,
// defaults and ranges are documented once, in the schema table (core/config/experiment_schema.cpp;
// `lrmoe schema` prints it).

#include <cstdint>
#include <string>

namespace lrmoe {

enum class RouterKind { Softmax, Sigmoid };

struct ModelConfig {
  std::string preset;      // name the dimensions below were taken from, or
  std::string hf_config;   // the Hugging Face config.json they were read from
  int64_t vocab_size = 0;  // 0: take the vocabulary of the data source
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  double rope_theta = 1e6;
  double partial_rotary = 1.0;  // fraction of each head's dimensions that RoPE rotates
  bool qk_norm = false;
  bool qkv_bias = false;
  double rms_eps = 1e-6;
  int64_t first_k_dense = 0;  // the first k layers use a dense SwiGLU FFN
  int64_t dense_ffn_size = 0;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t expert_ffn_size = 0;
  int64_t shared_experts = 0;  // each of size expert_ffn_size
  // Every layer after the first first_k_dense a dense SwiGLU FFN of the MoE's active width
  // instead (dense_equivalent_width): the dense model of the same active parameters, the
  // sensitivity gate's dense arm (Note [Sensitivity gate]).
  bool moe_as_dense = false;
  RouterKind router = RouterKind::Softmax;
  bool norm_topk = true;  // renormalise the top-k gates to sum to one
  double routed_scaling_factor = 1.0;
  double aux_loss_coef = 0.0;     // load-balancing auxiliary loss
  double z_loss_coef = 0.0;       // router z-loss
  double bias_update_rate = 0.0;  // aux-loss-free selection-bias update (sigmoid router)
  bool tie_embeddings = false;
  double init_std = 0.02;
  // A Hugging Face folder (config.json, safetensors) whose weights the run starts from instead of
  // a random initialisation; empty: none.
  std::string init_from;
};

// The layers that route tokens to experts: none when every MoE layer is dense (moe_as_dense).
inline int64_t moe_layer_count(const ModelConfig& m) {
  return m.moe_as_dense ? 0 : m.num_layers - m.first_k_dense;
}

// The width of a dense SwiGLU FFN with an MoE layer's active parameters per token: its top_k
// routed experts and its shared experts side by side, (top_k + shared_experts) x expert_ffn_size.
inline int64_t dense_equivalent_width(const ModelConfig& m) {
  return (m.top_k + m.shared_experts) * m.expert_ffn_size;
}

}  // namespace lrmoe
