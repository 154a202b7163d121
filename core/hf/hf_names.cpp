#include "core/hf/hf_names.hpp"

#include <fmt/format.h>

namespace lrmoe {
namespace {

// The pieces of a fused SwiGLU (lrmoe's `module`.gate_up and .down) under `hf` (a dense MLP or
// the shared experts).
void swiglu_pieces(std::vector<HfPiece>& pieces, const std::string& hf, const std::string& module,
                   int64_t ffn) {
  pieces.push_back({hf + ".gate_proj.weight", module + ".gate_up.weight", -1, 0, ffn});
  pieces.push_back({hf + ".up_proj.weight", module + ".gate_up.weight", -1, ffn, ffn});
  pieces.push_back({hf + ".down_proj.weight", module + ".down.weight"});
}

}  // namespace

std::string hf_fused_experts_name(int64_t layer, bool gate_up) {
  return fmt::format("model.layers.{}.mlp.experts.{}", layer,
                     gate_up ? "gate_up_proj" : "down_proj");
}

std::vector<HfPiece> hf_pieces(const ModelConfig& m, HfFamily family) {
  std::vector<HfPiece> pieces;
  pieces.push_back({"model.embed_tokens.weight", "embedding.weight"});
  for (int64_t i = 0; i < m.num_layers; ++i) {
    const std::string hf = fmt::format("model.layers.{}", i);
    const std::string block = fmt::format("block{}", i);
    pieces.push_back({hf + ".input_layernorm.weight", block + ".attention_norm.weight"});
    for (const char* projection : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      const std::string name = fmt::format("{}.self_attn.{}", hf, projection);
      const std::string ours = fmt::format("{}.attention.{}", block, projection);
      pieces.push_back({name + ".weight", ours + ".weight"});
      if (m.qkv_bias && std::string(projection) != "o_proj")
        pieces.push_back({name + ".bias", ours + ".bias"});
    }
    if (m.qk_norm) {
      pieces.push_back({hf + ".self_attn.q_norm.weight", block + ".attention.q_norm.weight"});
      pieces.push_back({hf + ".self_attn.k_norm.weight", block + ".attention.k_norm.weight"});
    }
    pieces.push_back({hf + ".post_attention_layernorm.weight", block + ".ffn_norm.weight"});
    if (i < m.first_k_dense) {
      swiglu_pieces(pieces, hf + ".mlp", block + ".dense_ffn", m.dense_ffn_size);
      continue;
    }
    pieces.push_back({hf + ".mlp.gate.weight", block + ".moe.router.weight"});
    if (family == HfFamily::Glm4Moe) {
      pieces.push_back(
          {hf + ".mlp.gate.e_score_correction_bias", block + ".moe.router.selection_bias"});
    }
    const int64_t ffn = m.expert_ffn_size;
    for (int64_t e = 0; e < m.num_experts; ++e) {
      const std::string expert = fmt::format("{}.mlp.experts.{}", hf, e);
      pieces.push_back(
          {expert + ".gate_proj.weight", block + ".moe.experts_gate_up", e, 0, ffn, i});
      pieces.push_back(
          {expert + ".up_proj.weight", block + ".moe.experts_gate_up", e, ffn, ffn, i});
      pieces.push_back({expert + ".down_proj.weight", block + ".moe.experts_down", e, 0, -1, i});
    }
    if (m.shared_experts > 0) {
      swiglu_pieces(pieces, hf + ".mlp.shared_experts", block + ".moe.shared_experts",
                    m.shared_experts * ffn);
    }
  }
  pieces.push_back({"model.norm.weight", "final_norm.weight"});
  if (!m.tie_embeddings) pieces.push_back({"lm_head.weight", "lm_head.weight"});
  return pieces;
}

}  // namespace lrmoe
