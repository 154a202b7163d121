#pragma once
// model.init_from: a run's weights read from a Hugging Face folder instead of drawn at random
// (Note [Hugging Face models] in docs/notes.md).

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/config/model_config.hpp"
#include "core/model/transformer.hpp"

namespace lrmoe {

struct HfImport {
  int64_t tensors = 0;  // tensors (or blocks of a stacked one) read
  uint64_t bytes = 0;   // the bytes read of the files
  double seconds = 0;
  // Tensors of the folder this model has no place for (GLM's multi-token-prediction layer): not
  // read.
  std::vector<std::string> unused;
};

// Copies the weights of the folder `folder` into `model` (built from `config`, on the CPU):
// every parameter and buffer, and of a sharded MoE layer only the experts it holds, each read
// from its shard's pages alone. The folder's config.json must describe a model of the same
// shapes (a computation-only difference, RoPE's theta say, is logged). Reads transformers' Hub
// layout (a tensor per expert) and transformers 5's stacked one. Throws HfError naming the file
// and the tensor when a name is missing or a shape or dtype does not fit.
// Checks, from the folder's config.json and safetensors headers alone, that it holds every tensor
// a model of `config` needs: what a run checks before it records anything. Throws HfError.
void check_hf_weights(const ModelConfig& config, const std::filesystem::path& folder);

HfImport load_hf_weights(Transformer& model, const ModelConfig& config,
                         const std::filesystem::path& folder);

}  // namespace lrmoe
