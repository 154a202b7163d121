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

}  // namespace lrmoe
