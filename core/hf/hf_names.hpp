#pragma once
// Where each tensor of a Hugging Face checkpoint lives in lrmoe's model (Note [Hugging Face
// models] in docs/notes.md). lrmoe fuses what transformers' Hub checkpoints keep apart: a dense
// SwiGLU's gate and up projections are one [2 * ffn, hidden] matrix, and a layer's routed experts
// are stacked, [experts, 2 * ffn, hidden] and [experts, hidden, ffn]. A Hugging Face tensor is
// therefore a block of rows of one lrmoe tensor, or of one expert's slice of a stacked one.

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/hf_model_config.hpp"
#include "core/config/model_config.hpp"

namespace lrmoe {

struct HfPiece {
  std::string hf_name;     // "model.layers.1.mlp.experts.7.up_proj.weight"
  std::string lrmoe_name;  // "block1.moe.experts_gate_up", as named_parameters() names it
  int64_t expert = -1;     // the routed expert, for a stacked expert tensor; -1: not stacked
  int64_t first_row = 0;   // rows [first_row, first_row + rows) of the (expert's) tensor
  int64_t rows = -1;       // -1: every row
  int64_t layer = -1;      // the layer of a stacked expert tensor (its stacked Hub name's)
};

// Every tensor of `model` in `family`'s Hub layout (one tensor per expert and projection), in
// layer order. The selection bias is GLM-4.5's e_score_correction_bias; Qwen3-MoE has none.
std::vector<HfPiece> hf_pieces(const ModelConfig& model, HfFamily family);

// transformers 5's own layout of a layer's routed experts (save_pretrained with
// save_original_format=False): one stacked tensor per projection, as lrmoe's.
std::string hf_fused_experts_name(int64_t layer, bool gate_up);

}  // namespace lrmoe
