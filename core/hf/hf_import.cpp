#include "core/hf/hf_import.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <set>

#include "core/hf/hf_error.hpp"
#include "core/hf/hf_folder.hpp"
#include "core/hf/hf_names.hpp"

namespace lrmoe {
namespace {

// A field of two models that must agree for one's weights to fit the other, and its values.
struct Difference {
  std::string field;
  std::string theirs, ours;
  bool shapes;  // the weights' shapes depend on it (else only the computation does)
};

std::vector<Difference> differences(const ModelConfig& theirs, const ModelConfig& ours) {
  std::vector<Difference> found;
  auto compare = [&](const char* field, auto a, auto b, bool shapes) {
    if (a != b) found.push_back({field, fmt::format("{}", a), fmt::format("{}", b), shapes});
  };
  compare("vocab_size", theirs.vocab_size, ours.vocab_size, true);
  compare("hidden_size", theirs.hidden_size, ours.hidden_size, true);
  compare("num_layers", theirs.num_layers, ours.num_layers, true);
  compare("num_heads", theirs.num_heads, ours.num_heads, true);
  compare("num_kv_heads", theirs.num_kv_heads, ours.num_kv_heads, true);
  compare("head_dim", theirs.head_dim, ours.head_dim, true);
  compare("qk_norm", theirs.qk_norm, ours.qk_norm, true);
  compare("qkv_bias", theirs.qkv_bias, ours.qkv_bias, true);
  compare("first_k_dense", theirs.first_k_dense, ours.first_k_dense, true);
  if (ours.first_k_dense > 0)
    compare("dense_ffn_size", theirs.dense_ffn_size, ours.dense_ffn_size, true);
  compare("num_experts", theirs.num_experts, ours.num_experts, true);
  compare("expert_ffn_size", theirs.expert_ffn_size, ours.expert_ffn_size, true);
  compare("shared_experts", theirs.shared_experts, ours.shared_experts, true);
  compare("router", static_cast<int>(theirs.router), static_cast<int>(ours.router), true);
  compare("tie_embeddings", theirs.tie_embeddings, ours.tie_embeddings, true);
  compare("rope_theta", theirs.rope_theta, ours.rope_theta, false);
  compare("partial_rotary", theirs.partial_rotary, ours.partial_rotary, false);
  compare("rms_eps", theirs.rms_eps, ours.rms_eps, false);
  compare("top_k", theirs.top_k, ours.top_k, false);
  compare("norm_topk", theirs.norm_topk, ours.norm_topk, false);
  compare("routed_scaling_factor", theirs.routed_scaling_factor, ours.routed_scaling_factor, false);
  return found;
}

// The experts each stacked expert tensor holds, by lrmoe name: [first, first + count).
std::map<std::string, ExpertShard> held_experts(Transformer& model) {
  std::map<std::string, ExpertShard> held;
  const auto& layers = model->moe_layers();
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const std::string block = fmt::format("block{}.moe.", model->moe_layer_indices()[l]);
    held[block + "experts_gate_up"] = layers[l]->shard();
    held[block + "experts_down"] = layers[l]->shard();
  }
  return held;
}

// Where `piece` goes in lrmoe's tensor `into`: its rows of the expert's slice (or of `into`).
torch::Tensor destination(const HfPiece& piece, const torch::Tensor& into, int64_t first_expert) {
  torch::Tensor slice = piece.expert >= 0 ? into[piece.expert - first_expert] : into;
  return piece.rows >= 0 ? slice.narrow(0, piece.first_row, piece.rows) : slice;
}

// Checks, from the header alone, that tensor `name` of `file` is a float weight of `shape`.
void check_entry(const SafetensorsFile& file, const std::string& name,
                 const std::vector<int64_t>& shape) {
  const SafetensorsEntry& entry = file.header().tensors.at(name);
  if (entry.dtype != "F32" && entry.dtype != "BF16" && entry.dtype != "F16" &&
      entry.dtype != "F64") {
    throw HfError(fmt::format("{}: tensor '{}' is {}, not a floating-point weight",
                              file.path().string(), name, entry.dtype));
  }
  if (entry.shape != shape) {
    throw HfError(
        fmt::format("{}: tensor '{}' has shape {}, this model's is {}; point "
                    "model.init_from at this model's weights",
                    file.path().string(), name, c10::str(entry.shape), c10::str(shape)));
  }
}

// Copies what was read into `to`, counting its bytes as they were in the file.
// Copies `read`, the tensor `name` of `file`, into `to`. Weights that are not finite are refused
// here, by name: the run would otherwise stop at its first step as a divergence, blaming train.lr.
void copy_counted(torch::Tensor& to, const torch::Tensor& read, const SafetensorsFile& file,
                  const std::string& name, HfImport& import) {
  if (read.is_floating_point() && !torch::isfinite(read).all().item<bool>()) {
    throw HfError(fmt::format(
        "{}: tensor '{}' holds NaN or infinite values; model.init_from needs finite weights (a "
        "checkpoint saved from a diverged run?)",
        file.path().string(), name));
  }
  to.copy_(read);
  import.bytes += static_cast<uint64_t>(read.numel()) * read.element_size();
  ++import.tensors;
}

// Where a piece's weights are in `folder`: its own tensor, or (an expert's, in transformers 5's
// stacked layout) its block of the layer's stacked tensor, named in `stacked`.
struct PieceSource {
  const SafetensorsFile* file = nullptr;
  std::string name;
  bool stacked = false;
};

PieceSource find_piece(const HfFolder& folder, const HfPiece& piece) {
  if (const SafetensorsFile* file = folder.file_of(piece.hf_name)) return {file, piece.hf_name};
  std::string stacked;
  if (piece.expert >= 0) {
    stacked = hf_fused_experts_name(piece.layer,
                                    piece.lrmoe_name.find("experts_gate_up") != std::string::npos);
    if (const SafetensorsFile* file = folder.file_of(stacked)) return {file, stacked, true};
  }
  throw HfError(fmt::format(
      "{}: has no tensor '{}'{}; point model.init_from at a folder of this "
      "model's weights",
      folder.path().string(), piece.hf_name, stacked.empty() ? "" : " (nor '" + stacked + "')"));
}

// Refuses a folder whose config.json gives other shapes than `config`; logs computation-only
// differences.
void check_config(const HfFolder& folder, const ModelConfig& config) {
  for (const Difference& d : differences(folder.config().model, config)) {
    if (d.shapes) {
      throw HfError(fmt::format(
          "{}: its config.json gives {} = {}, this experiment's model.{} is {}: the weights do "
          "not fit; point model.init_from at this model's weights, or set model.hf_config to "
          "the folder",
          folder.path().string(), d.field, d.theirs, d.field, d.ours));
    }
    spdlog::info("{}: its config.json gives {} = {}; this run computes with model.{} = {}",
                 folder.path().string(), d.field, d.theirs, d.field, d.ours);
  }
}

}  // namespace

void check_hf_weights(const ModelConfig& config, const std::filesystem::path& folder_path) {
  const HfFolder folder(folder_path);
  check_config(folder, config);
  for (const HfPiece& piece : hf_pieces(config, folder.config().family))
    (void)find_piece(folder, piece);
}

HfImport load_hf_weights(Transformer& model, const ModelConfig& config,
                         const std::filesystem::path& folder_path) {
  const auto started = std::chrono::steady_clock::now();
  const HfFolder folder(folder_path);
  check_config(folder, config);
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& item : model->named_parameters()) tensors[item.key()] = item.value();
  for (const auto& item : model->named_buffers()) tensors[item.key()] = item.value();
  const std::map<std::string, ExpertShard> held = held_experts(model);

  HfImport import;
  // Every name this model has a place for, whichever process holds it.
  std::set<std::string> known;
  torch::NoGradGuard no_grad;
  for (const HfPiece& piece : hf_pieces(config, folder.config().family)) {
    known.insert(piece.hf_name);
    if (piece.expert >= 0) {
      known.insert(hf_fused_experts_name(piece.layer, true));
      known.insert(hf_fused_experts_name(piece.layer, false));
    }
    const torch::Tensor& into = tensors.at(piece.lrmoe_name);
    ExpertShard shard{0, 0};
    if (piece.expert >= 0) {
      shard = held.at(piece.lrmoe_name);
      if (!shard.holds(piece.expert)) continue;  // another process's expert
    }
    torch::Tensor to = destination(piece, into, shard.first);
    const PieceSource source = find_piece(folder, piece);
    if (!source.stacked) {
      check_entry(*source.file, source.name, to.sizes().vec());
      copy_counted(to, source.file->read(source.name), *source.file, source.name, import);
    } else {
      std::vector<int64_t> shape = into.sizes().vec();
      shape[0] = config.num_experts;
      check_entry(*source.file, source.name, shape);
      copy_counted(to, source.file->read(source.name, {piece.expert, piece.first_row, piece.rows}),
                   *source.file, source.name, import);
    }
  }
  for (const std::string& name : folder.tensor_names())
    if (known.count(name) == 0) import.unused.push_back(name);
  import.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return import;
}

}  // namespace lrmoe
