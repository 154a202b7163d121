#include "core/config/model_presets.hpp"

#include <functional>
#include <map>

namespace lrmoe {
namespace {

// Qwen3-30B-A3B: 48 MoE layers, 128 experts, top-8 softmax router with renormalisation.
ModelConfig qwen3_30b_a3b() {
  ModelConfig m;
  m.vocab_size = 151936;
  m.hidden_size = 2048;
  m.num_layers = 48;
  m.num_heads = 32;
  m.num_kv_heads = 4;
  m.head_dim = 128;
  m.rope_theta = 1e6;
  m.partial_rotary = 1.0;
  m.qk_norm = true;
  m.qkv_bias = false;
  m.rms_eps = 1e-6;
  m.first_k_dense = 0;
  m.dense_ffn_size = 6144;
  m.num_experts = 128;
  m.top_k = 8;
  m.expert_ffn_size = 768;
  m.shared_experts = 0;
  m.router = RouterKind::Softmax;
  m.norm_topk = true;
  m.routed_scaling_factor = 1.0;
  m.aux_loss_coef = 1e-3;
  m.z_loss_coef = 0.0;
  m.bias_update_rate = 0.0;
  return m;
}

// GLM-4.5-Air (106B-A12B): 46 layers, layer 0 dense, 128 routed experts + 1 shared, sigmoid
// router with a selection bias updated without an auxiliary loss.
ModelConfig glm45_air() {
  ModelConfig m;
  m.vocab_size = 151552;
  m.hidden_size = 4096;
  m.num_layers = 46;
  m.num_heads = 96;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.rope_theta = 1e6;
  m.partial_rotary = 0.5;
  m.qk_norm = false;
  m.qkv_bias = true;
  m.rms_eps = 1e-5;
  m.first_k_dense = 1;
  m.dense_ffn_size = 10944;
  m.num_experts = 128;
  m.top_k = 8;
  m.expert_ffn_size = 1408;
  m.shared_experts = 1;
  m.router = RouterKind::Sigmoid;
  m.norm_topk = true;
  m.routed_scaling_factor = 1.0;
  m.aux_loss_coef = 0.0;
  m.z_loss_coef = 0.0;
  m.bias_update_rate = 1e-3;
  return m;
}

// The scaled-down variants keep the routing structure (experts, top-k, router kind, shared
// experts, dense first layer) and shrink every width so that a 2-core CPU trains them in minutes.
// Their vocabulary comes from the data source.
ModelConfig shrink(ModelConfig m) {
  m.vocab_size = 0;
  m.hidden_size = 128;
  m.num_layers = 4;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 32;
  m.dense_ffn_size = 512;
  m.expert_ffn_size = 64;
  return m;
}

// A minimal MoE for tests: 8 experts, top-2, softmax router.
ModelConfig tiny_moe() {
  ModelConfig m;
  m.vocab_size = 0;
  m.hidden_size = 64;
  m.num_layers = 2;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 16;
  m.qk_norm = true;
  m.dense_ffn_size = 128;
  m.num_experts = 8;
  m.top_k = 2;
  m.expert_ffn_size = 32;
  m.aux_loss_coef = 1e-2;
  return m;
}

const std::map<std::string, std::function<ModelConfig()>>& registry() {
  static const std::map<std::string, std::function<ModelConfig()>> presets = {
      {"qwen3-30b-a3b", qwen3_30b_a3b},
      {"glm45-air", glm45_air},
      {"qwen3-mini", [] { return shrink(qwen3_30b_a3b()); }},
      {"glm45-mini", [] { return shrink(glm45_air()); }},
      {"tiny-moe", tiny_moe},
  };
  return presets;
}

}  // namespace

std::optional<ModelConfig> find_preset(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) return std::nullopt;
  ModelConfig m = it->second();
  m.preset = name;
  return m;
}

std::optional<std::string> full_size_preset(const std::string& name) {
  static const std::map<std::string, std::string> full = {{"qwen3-mini", "qwen3-30b-a3b"},
                                                          {"glm45-mini", "glm45-air"},
                                                          {"qwen3-30b-a3b", "qwen3-30b-a3b"},
                                                          {"glm45-air", "glm45-air"}};
  const auto it = full.find(name);
  if (it == full.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& entry : registry()) names.push_back(entry.first);
  return names;
}

}  // namespace lrmoe
