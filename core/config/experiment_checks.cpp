#include "core/config/experiment_checks.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/config/config_error.hpp"
#include "core/config/experiment_schema.hpp"
#include "core/config/memory_spec.hpp"
#include "lrmoe/static_owners.hpp"

namespace lrmoe {

FieldPlaces::FieldPlaces(std::string experiment_name)
    : experiment_name_(std::move(experiment_name)) {}

void FieldPlaces::record(const std::string& field, const std::string& place) {
  places_[field] = {next_order_++, place};
}

bool FieldPlaces::assigned(std::string_view field) const {
  return places_.find(field) != places_.end();
}

std::string FieldPlaces::latest(std::initializer_list<std::string_view> fields) const {
  const std::pair<int, std::string>* latest = nullptr;
  for (std::string_view field : fields) {
    const auto it = places_.find(field);
    if (it != places_.end() && (latest == nullptr || it->second.first > latest->first)) {
      latest = &it->second;
    }
  }
  return latest == nullptr ? experiment_name_ : latest->second;
}

void check_consistency(const Experiment& experiment, const FieldPlaces& places) {
  const ModelConfig& model = experiment.model;
  const DataConfig& data = experiment.data;
  const TrainConfig& train = experiment.train;
  const ClusterConfig& cluster = experiment.cluster;

  const auto require = [&](bool ok, std::initializer_list<std::string_view> fields,
                           const std::string& problem) {
    if (!ok) throw ConfigError(places.latest(fields) + ": " + problem);
  };

  require(model.num_heads % model.num_kv_heads == 0, {"model.num_heads", "model.num_kv_heads"},
          fmt::format("model.num_heads ({}) must be divisible by model.num_kv_heads ({})",
                      model.num_heads, model.num_kv_heads));
  require(model.first_k_dense <= model.num_layers, {"model.first_k_dense", "model.num_layers"},
          fmt::format("model.first_k_dense ({}) must be <= model.num_layers ({})",
                      model.first_k_dense, model.num_layers));
  require(model.first_k_dense == 0 || model.dense_ffn_size > 0,
          {"model.dense_ffn_size", "model.first_k_dense"},
          fmt::format("model.dense_ffn_size must be > 0 when model.first_k_dense ({}) layers "
                      "are dense",
                      model.first_k_dense));
  try {
    parse_memory_spec(cluster.memory_per_rank);
  } catch (const std::invalid_argument& error) {
    require(false, {"cluster.memory_per_rank"},
            std::string("cluster.memory_per_rank: ") + error.what());
  }
  require(!cluster.profile.empty(), {"cluster.profile"},
          "cluster.profile must name a hardware profile (`lrmoe validate` lists them in the error "
          "of an unknown one)");
  const bool has_moe_layers = model.first_k_dense < model.num_layers;
  const std::string moe_layers =
      fmt::format("when MoE layers exist (model.first_k_dense {} < model.num_layers {})",
                  model.first_k_dense, model.num_layers);
  require(!has_moe_layers || model.num_experts > 0,
          {"model.num_experts", "model.first_k_dense", "model.num_layers"},
          "model.num_experts must be > 0 " + moe_layers);
  require(!has_moe_layers || model.top_k > 0, {"model.top_k", "model.first_k_dense"},
          "model.top_k must be > 0 " + moe_layers);
  require(!has_moe_layers || model.expert_ffn_size > 0,
          {"model.expert_ffn_size", "model.first_k_dense"},
          "model.expert_ffn_size must be > 0 " + moe_layers);
  require(model.top_k <= model.num_experts, {"model.top_k", "model.num_experts"},
          fmt::format("model.top_k ({}) must be <= model.num_experts ({})", model.top_k,
                      model.num_experts));
  // A single renormalised gate is p / p = 1 whatever the logits: the loss sends the router no
  // gradient, and only its auxiliary losses train it (Note [Sensitivity gate]).
  require(!has_moe_layers || model.top_k != 1 || !model.norm_topk,
          {"model.norm_topk", "model.top_k"},
          "model.norm_topk = true with model.top_k = 1 makes every gate 1, so the router learns "
          "nothing from the loss; set model.norm_topk = false");
  require(!model.moe_as_dense || model.init_from.empty(), {"model.moe_as_dense", "model.init_from"},
          "model.moe_as_dense = true has no experts to start from model.init_from's weights; "
          "leave model.init_from empty");
  // RoPE rotates dimensions in pairs.
  const double rotated = static_cast<double>(model.head_dim) * model.partial_rotary;
  require(rotated == std::floor(rotated) && std::fmod(rotated, 2.0) == 0.0,
          {"model.head_dim", "model.partial_rotary"},
          fmt::format("model.head_dim * model.partial_rotary ({} * {} = {}) must be an even "
                      "whole number of rotated dimensions",
                      model.head_dim, model.partial_rotary, rotated));

  require(train.min_lr <= train.lr, {"train.min_lr", "train.lr"},
          fmt::format("train.min_lr ({}) must be <= train.lr ({})", train.min_lr, train.lr));

  const std::string kind = std::get<std::string>(find_field("data", "kind")->read(experiment));
  require(data.kind == DataKind::Synthetic || !data.path.empty(), {"data.kind", "data.path"},
          fmt::format("data.kind \"{}\" needs data.path", kind));
  // A token file does not say how many distinct tokens it was written with.
  require(data.kind != DataKind::Tokens || places.assigned("data.vocab_size"), {"data.kind"},
          "data.kind \"tokens\" needs data.vocab_size, the vocabulary of the token file");
  require(data.kind != DataKind::Tokens || data.token_dtype != TokenDtype::Uint16 ||
              data.vocab_size <= 65536,
          {"data.vocab_size", "data.token_dtype"},
          fmt::format("data.vocab_size ({}) does not fit data.token_dtype \"uint16\"; use "
                      "\"uint32\"",
                      data.vocab_size));
  const bool synthetic = data.kind == DataKind::Synthetic;
  require(!synthetic || data.topic_vocab <= data.vocab_size,
          {"data.topic_vocab", "data.vocab_size"},
          fmt::format("data.topic_vocab ({}) must be <= data.vocab_size ({})", data.topic_vocab,
                      data.vocab_size));
  require(!synthetic || data.branching <= data.topic_vocab, {"data.branching", "data.topic_vocab"},
          fmt::format("data.branching ({}) must be <= data.topic_vocab ({})", data.branching,
                      data.topic_vocab));
  // Text is read as bytes.
  const int64_t data_vocab = data.kind == DataKind::Text ? 256 : data.vocab_size;
  require(model.vocab_size == 0 || model.vocab_size >= data_vocab,
          {"model.vocab_size", "data.vocab_size", "data.kind"},
          fmt::format("model.vocab_size ({}) must be 0 or >= the {} data's vocabulary ({})",
                      model.vocab_size, kind, data_vocab));

  // Every rank owns as many experts (E/R), or, with more ranks than experts, each of the first E
  // ranks owns one and the others none (static_owners.hpp).
  require(
      model.num_experts == 0 || model.num_experts % cluster.ranks == 0 ||
          cluster.ranks % model.num_experts == 0,
      {"cluster.ranks", "model.num_experts"},
      fmt::format("cluster.ranks ({}) must divide model.num_experts ({}) or be a multiple of it",
                  cluster.ranks, model.num_experts));
  const int64_t owned_per_rank = owned_experts_per_rank(model.num_experts, cluster.ranks);
  require(
      cluster.slots_per_rank == 0 || cluster.slots_per_rank >= owned_per_rank,
      {"cluster.slots_per_rank", "cluster.ranks", "model.num_experts"},
      fmt::format("cluster.slots_per_rank ({}) must be 0 or at least the experts each rank owns, "
                  "ceil(model.num_experts / cluster.ranks) = {}",
                  cluster.slots_per_rank, owned_per_rank));
}

}  // namespace lrmoe
