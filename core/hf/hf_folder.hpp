#pragma once
// A Hugging Face model folder as transformers' save_pretrained writes it: config.json, and the
// tensors in model.safetensors or in the shards model.safetensors.index.json maps each name to.
// Opening one maps its shards; no tensor is read until asked for, so a process reading only its
// own experts touches only their pages.

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/config/hf_model_config.hpp"
#include "core/hf/safetensors_file.hpp"

namespace lrmoe {

// The index's file name, and the single file's.
inline constexpr const char* kHfIndexFile = "model.safetensors.index.json";
inline constexpr const char* kHfSingleFile = "model.safetensors";

class HfFolder {
 public:
  // Reads config.json (read_hf_config) and the index, and maps every shard the index names.
  // Throws HfError (ConfigError for config.json) naming the file and what to do.
  explicit HfFolder(const std::filesystem::path& folder);

  const std::filesystem::path& path() const { return folder_; }
  const HfModel& config() const { return config_; }
  // The shard holding `name`; null when the folder has no such tensor.
  const SafetensorsFile* file_of(const std::string& name) const;
  // Every tensor name of the folder, sorted.
  std::vector<std::string> tensor_names() const;

 private:
  std::filesystem::path folder_;
  HfModel config_;
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;  // by file name
  std::map<std::string, const SafetensorsFile*> where_;            // tensor -> its shard
};

}  // namespace lrmoe
