#pragma once
// Writing a Hugging Face model folder from lrmoe tensors (`lrmoe export-hf`; Note [Hugging Face
// models] in docs/notes.md): config.json, safetensors shards in transformers' Hub layout, and the
// index mapping each tensor to its shard. Each shard is written from one source of tensors (the
// dense state, or one process's experts), so an export never holds more than one source.

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/config/hf_model_config.hpp"
#include "core/hf/safetensors_file.hpp"

namespace lrmoe {

// lrmoe tensors by name (as named_parameters() and named_buffers() name them), and the first
// expert of the stacked expert tensors among them (a process's shard starts there).
struct HfExportSource {
  NamedTensorList tensors;
  int64_t first_expert = 0;
};

struct HfExportedFile {
  std::string name;  // "model-00002-of-00003.safetensors"
  int64_t tensors = 0;
  uint64_t bytes = 0;         // of the file
  uint64_t tensor_bytes = 0;  // of its tensors' data (an index's total_size counts these)
  std::string sha256;
};

// "model-0000I-of-0000N.safetensors", I counted from 1, as transformers names its shards.
std::string hf_shard_name(int64_t index, int64_t count);

// Writes, as `file_name` in `folder`, every Hugging Face tensor of `model` (in `family`'s layout)
// that `source` holds, in `dtype` (the router's always float32); adds each name and its file to
// `weight_map`. Throws HfError when `source` holds a piece of the wrong shape, or the file cannot
// be written.
HfExportedFile write_hf_shard(const std::filesystem::path& folder, const std::string& file_name,
                              const ModelConfig& model, HfFamily family,
                              const HfExportSource& source, torch::ScalarType dtype,
                              std::map<std::string, std::string>& weight_map);

// Writes config.json and model.safetensors.index.json (total_size: the tensors' bytes) into
// `folder`, after its shards; throws HfError when a tensor of the model is in none of them.
void write_hf_folder_files(const std::filesystem::path& folder, const ModelConfig& model,
                           HfFamily family, torch::ScalarType dtype,
                           const std::map<std::string, std::string>& weight_map,
                           uint64_t tensor_bytes);

}  // namespace lrmoe
