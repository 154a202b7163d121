#include "core/hf/hf_export.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/hf/hf_error.hpp"
#include "core/hf/hf_folder.hpp"
#include "core/hf/hf_names.hpp"
#include "core/system/atomic_file.hpp"

namespace lrmoe {
namespace {

namespace fs = std::filesystem;

void write_text(const fs::path& file, const std::string& text) {
  try {
    write_file_atomically(file, [&](const ByteSink& sink) { sink(text.data(), text.size()); });
  } catch (const std::exception& e) {
    throw HfError(fmt::format("cannot write {}: {}", file.string(), e.what()));
  }
}

const char* dtype_name(torch::ScalarType dtype) {
  return dtype == torch::kBFloat16 ? "bfloat16" : "float32";
}

}  // namespace

std::string hf_shard_name(int64_t index, int64_t count) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index, count);
}

HfExportedFile write_hf_shard(const fs::path& folder, const std::string& file_name,
                              const ModelConfig& model, HfFamily family,
                              const HfExportSource& source, torch::ScalarType dtype,
                              std::map<std::string, std::string>& weight_map) {
  std::map<std::string, torch::Tensor> by_name(source.tensors.begin(), source.tensors.end());
  NamedTensorList out;
  uint64_t tensor_bytes = 0;
  for (const HfPiece& piece : hf_pieces(model, family)) {
    const auto it = by_name.find(piece.lrmoe_name);
    if (it == by_name.end()) continue;
    torch::Tensor t = it->second.detach();
    if (piece.expert >= 0) {
      const int64_t local = piece.expert - source.first_expert;
      if (local < 0 || local >= t.size(0)) continue;  // another source's expert
      t = t[local];
    }
    if (piece.rows >= 0) t = t.narrow(0, piece.first_row, piece.rows);
    // The router's weight and selection bias stay float32 in any export, as transformers keeps
    // them: bias steps of 1e-3 are below bfloat16's resolution and would change the choices.
    const bool router = piece.lrmoe_name.find(".moe.router.") != std::string::npos;
    out.emplace_back(piece.hf_name,
                     t.to(torch::kCPU, router ? torch::kFloat32 : dtype).contiguous());
    tensor_bytes +=
        static_cast<uint64_t>(out.back().second.numel()) * out.back().second.element_size();
    weight_map[piece.hf_name] = file_name;
  }
  const SafetensorsWritten written = write_safetensors(folder / file_name, out, {{"format", "pt"}});
  return {file_name, static_cast<int64_t>(out.size()), written.bytes, tensor_bytes, written.sha256};
}

void write_hf_folder_files(const fs::path& folder, const ModelConfig& model, HfFamily family,
                           torch::ScalarType dtype,
                           const std::map<std::string, std::string>& weight_map,
                           uint64_t tensor_bytes) {
  for (const HfPiece& piece : hf_pieces(model, family)) {
    if (weight_map.count(piece.hf_name) == 0) {
      throw HfError(
          fmt::format("{}: tensor '{}' (lrmoe's {}) is in none of the files written: "
                      "the checkpoint lacks it; export another step (--step)",
                      folder.string(), piece.hf_name, piece.lrmoe_name));
    }
  }
  nlohmann::json index;
  index["metadata"] = {{"total_size", tensor_bytes}};
  index["weight_map"] = weight_map;
  write_text(folder / kHfIndexFile, index.dump(2) + "\n");
  write_text(folder / "config.json", hf_config_json(model, family, dtype_name(dtype)));
}

}  // namespace lrmoe
