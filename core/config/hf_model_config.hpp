#pragma once
// Models described by a Hugging Face config.json, of the two families lrmoe reproduces:
// Qwen3-MoE (`Qwen3MoeForCausalLM`, model_type "qwen3_moe") and GLM-4.5 (`Glm4MoeForCausalLM`,
// "glm4_moe"). Reading maps every field that changes the computation onto a ModelConfig and
// refuses, naming it, a field lrmoe does not implement or does not know (Note [Hugging Face
// models] in docs/notes.md); writing gives the config.json transformers builds the same model
// from. Both the transformers 4 spelling (rope_theta, num_experts) and the 5 one
// (rope_parameters, num_local_experts) are read.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/config/model_config.hpp"

namespace lrmoe {

enum class HfFamily { Qwen3Moe, Glm4Moe };

// "Qwen3MoeForCausalLM" / "Glm4MoeForCausalLM".
const char* hf_architecture(HfFamily family);

// A model read from a config.json.
struct HfModel {
  HfFamily family = HfFamily::Qwen3Moe;
  ModelConfig model;  // hf_config set to the file read
  // Fields accepted that another implementation would compute with and lrmoe does not, as
  // transformers does not either (GLM's multi-token-prediction layers): one line each.
  std::vector<std::string> notes;
};

// `path`: a config.json, or a folder holding one. Throws ConfigError whose message starts with
// the file (and the field), and says what to do.
HfModel read_hf_config(const std::filesystem::path& path);

// The config.json file `path` names (itself, or config.json inside the folder).
std::filesystem::path hf_config_file(const std::filesystem::path& path);

// The family whose transformers model computes what `model` does; none, with why in `why_not`,
// when no family does (a softmax router with shared experts, say).
std::optional<HfFamily> hf_family(const ModelConfig& model, std::string* why_not);

// The config.json of `model` in `family` (checked with hf_family first), `dtype` being the
// safetensors' ("float32", "bfloat16"), as transformers 4.51+ and 5 read it.
std::string hf_config_json(const ModelConfig& model, HfFamily family, const std::string& dtype);

}  // namespace lrmoe
