#include "core/hf/hf_folder.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/hf/hf_error.hpp"
#include "core/system/json_file.hpp"

namespace lrmoe {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// An index maps tensor names to file names; a few MB for the largest models.
constexpr std::uintmax_t kMostIndexBytes = 64 << 20;

// The index's weight_map: tensor name -> file name (a plain name inside the folder).
std::map<std::string, std::string> read_index(const fs::path& file) {
  json index;
  try {
    index = read_json_file(file, kMostIndexBytes);
  } catch (const JsonFileError& e) {
    throw HfError(fmt::format("{}: {}", file.string(), e.what()));
  }
  const json* map = nullptr;
  if (index.is_object() && index.contains("weight_map")) map = &index.at("weight_map");
  if (map == nullptr || !map->is_object()) {
    throw HfError(
        fmt::format("{}: not a safetensors index (a JSON object with a weight_map of "
                    "tensor names to files)",
                    file.string()));
  }
  std::map<std::string, std::string> weight_map;
  for (const auto& item : map->items()) {
    const json& name = item.value();
    // A plain file name: an index must not send the reader out of its folder.
    if (!name.is_string() || name.get<std::string>().empty() ||
        fs::path(name.get<std::string>()).has_parent_path() || name == "." || name == "..") {
      throw HfError(fmt::format("{}: tensor '{}' maps to {}, not a file name in the folder",
                                file.string(), item.key(), name.dump()));
    }
    weight_map[item.key()] = name.get<std::string>();
  }
  return weight_map;
}

}  // namespace

HfFolder::HfFolder(const fs::path& folder) : folder_(folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    throw HfError(
        fmt::format("{}: not a folder; name a Hugging Face model folder (config.json "
                    "and safetensors files)",
                    folder.string()));
  }
  config_ = read_hf_config(folder);
  const fs::path index = folder / kHfIndexFile;
  std::map<std::string, std::string> weight_map;
  if (fs::exists(index, ec)) {
    weight_map = read_index(index);
  } else if (fs::exists(folder / kHfSingleFile, ec)) {
    auto single = std::make_unique<SafetensorsFile>(folder / kHfSingleFile);
    for (const auto& [name, entry] : single->header().tensors) weight_map[name] = kHfSingleFile;
    files_[kHfSingleFile] = std::move(single);
  } else {
    throw HfError(fmt::format("{}: has neither {} nor {}; its weights are missing", folder.string(),
                              kHfIndexFile, kHfSingleFile));
  }
  for (const auto& [name, file] : weight_map) {
    auto& shard = files_[file];
    if (!shard) shard = std::make_unique<SafetensorsFile>(folder / file);
    if (!shard->has(name)) {
      throw HfError(fmt::format("{}: the index puts tensor '{}' in {}, which does not hold it",
                                (folder / kHfIndexFile).string(), name, file));
    }
    where_[name] = shard.get();
  }
}

const SafetensorsFile* HfFolder::file_of(const std::string& name) const {
  const auto it = where_.find(name);
  return it == where_.end() ? nullptr : it->second;
}

std::vector<std::string> HfFolder::tensor_names() const {
  std::vector<std::string> names;
  for (const auto& [name, file] : where_) names.push_back(name);
  return names;
}

}  // namespace lrmoe
