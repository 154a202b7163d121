#include "core/config/hf_model_config.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>

#include "core/config/config_error.hpp"
#include "core/system/json_file.hpp"

namespace lrmoe {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A config.json is a few kilobytes: a file this large is something else.
constexpr std::uintmax_t kMostConfigBytes = 4 << 20;

// Fields transformers uses for anything but a forward and backward pass (generation, labels,
// serialisation, layers it does not build): accepted whatever their value. Every other field is
// read, or refused by name.
const std::set<std::string>& inert_fields() {
  static const std::set<std::string> fields = {
      "_name_or_path", "architectures", "model_type", "transformers_version", "torch_dtype",
      "dtype", "use_cache", "bos_token_id", "eos_token_id", "pad_token_id", "id2label", "label2id",
      "return_dict", "output_attentions", "output_hidden_states",
      // Whether transformers' forward adds the balancing loss: lrmoe trains with
      // router_aux_loss_coef whatever it says (Note [Hugging Face models]).
      "output_router_logits", "problem_type", "chunk_size_feed_forward", "tokenizer_class",
      "max_position_embeddings",  // only scaled RoPE reads it, and that is refused
      "is_encoder_decoder"};
  return fields;
}

// The fields of one config.json, each taken once by what reads it; what is left untaken at the
// end and is not inert is refused.
class Fields {
 public:
  Fields(const json& object, fs::path file) : object_(object), file_(std::move(file)) {}

  bool has(const std::string& key) const {
    return object_.contains(key) && !object_.at(key).is_null();
  }

  // The value of `key`, marked read; null when absent.
  const json& take(const std::string& key) {
    taken_.insert(key);
    static const json null;
    return object_.contains(key) ? object_.at(key) : null;
  }

  int64_t integer(const std::string& key, std::optional<int64_t> fallback) {
    const json& v = take(key);
    if (v.is_null()) return or_missing(key, fallback);
    if (!v.is_number_integer()) fail(key, "must be an integer, got " + v.dump());
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX})
      fail(key, "= " + v.dump() + " is past the largest integer lrmoe holds");
    return v.get<int64_t>();
  }

  double real(const std::string& key, std::optional<double> fallback) {
    const json& v = take(key);
    if (v.is_null()) return or_missing(key, fallback);
    if (!v.is_number()) fail(key, "must be a number, got " + v.dump());
    return v.get<double>();
  }

  bool flag(const std::string& key, std::optional<bool> fallback) {
    const json& v = take(key);
    if (v.is_null()) return or_missing(key, fallback);
    if (!v.is_boolean()) fail(key, "must be true or false, got " + v.dump());
    return v.get<bool>();
  }

  // A field lrmoe computes only at one value: anything else is refused with `why`.
  template <typename T>
  void require(const std::string& key, T only, const std::string& why) {
    const json& v = take(key);
    if (v.is_null() || v == json(only)) return;
    fail(key, fmt::format("= {}: {}", v.dump(), why));
  }

  // Every field neither read nor inert is refused: it may change the computation.
  void refuse_unread() const {
    for (const auto& item : object_.items()) {
      if (taken_.count(item.key()) > 0 || inert_fields().count(item.key()) > 0) continue;
      fail(item.key(),
           "is not a field lrmoe reads, so the model it describes may compute something lrmoe "
           "would not; remove it if it changes nothing, or use a model lrmoe implements");
    }
  }

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw ConfigError(fmt::format("{}: field '{}' {}", file_.string(), key, what));
  }

 private:
  template <typename T>
  T or_missing(const std::string& key, std::optional<T> fallback) const {
    if (!fallback) fail(key, "is missing; the model cannot be built without it");
    return *fallback;
  }

  const json& object_;
  fs::path file_;
  std::set<std::string> taken_;
};

json parse_file(const fs::path& file) {
  json object;
  try {
    object = read_json_file(file, kMostConfigBytes);
  } catch (const JsonFileError& e) {
    throw ConfigError(
        fmt::format("{}: {}; name a config.json or a folder holding one", file.string(), e.what()));
  }
  if (!object.is_object()) {
    throw ConfigError(fmt::format("{}: a config.json is one JSON object, this is {}", file.string(),
                                  object.type_name()));
  }
  return object;
}

HfFamily family_of(Fields& fields) {
  std::optional<HfFamily> by_type, by_architecture;
  const json& type = fields.take("model_type");
  if (type == "qwen3_moe") by_type = HfFamily::Qwen3Moe;
  if (type == "glm4_moe") by_type = HfFamily::Glm4Moe;
  if (!type.is_null() && !by_type) {
    fields.fail("model_type", "= " + type.dump() +
                                  ": lrmoe builds \"qwen3_moe\" (Qwen3-MoE) and \"glm4_moe\" "
                                  "(GLM-4.5) models");
  }
  const json& architectures = fields.take("architectures");
  if (architectures.is_array()) {
    for (const json& name : architectures) {
      if (name == hf_architecture(HfFamily::Qwen3Moe)) by_architecture = HfFamily::Qwen3Moe;
      if (name == hf_architecture(HfFamily::Glm4Moe)) by_architecture = HfFamily::Glm4Moe;
    }
    if (!by_architecture) {
      fields.fail("architectures", "= " + architectures.dump() +
                                       ": lrmoe builds Qwen3MoeForCausalLM and "
                                       "Glm4MoeForCausalLM");
    }
  }
  if (by_type && by_architecture && *by_type != *by_architecture) {
    fields.fail("architectures",
                "names another family than model_type " + type.dump() + "; make them agree");
  }
  if (by_type) return *by_type;
  if (by_architecture) return *by_architecture;
  fields.fail("model_type",
              "is missing, and so is architectures: set model_type to "
              "\"qwen3_moe\" or \"glm4_moe\"");
}

// RoPE: transformers 5's rope_parameters, or the flat rope_theta / rope_scaling /
// partial_rotary_factor of 4. Only the unscaled ("default") kind is implemented.
void read_rope(Fields& fields, HfFamily family, ModelConfig& m) {
  const double default_partial = family == HfFamily::Glm4Moe ? 0.5 : 1.0;
  m.rope_theta = fields.real("rope_theta", 10000.0);
  m.partial_rotary = fields.real("partial_rotary_factor", default_partial);
  const json& scaling = fields.take("rope_scaling");
  const json& parameters = fields.take("rope_parameters");
  if (!scaling.is_null() && !parameters.is_null()) {
    fields.fail("rope_scaling",
                "and rope_parameters are both given; transformers would read "
                "rope_scaling alone: keep one");
  }
  for (const auto& [key, table] :
       {std::pair{"rope_scaling", &scaling}, std::pair{"rope_parameters", &parameters}}) {
    if (table->is_null()) continue;
    if (!table->is_object()) fields.fail(key, "must be an object, got " + table->dump());
    for (const auto& item : table->items()) {
      const json& v = item.value();
      const bool same_theta =
          !fields.has("rope_theta") || (v.is_number() && v.get<double>() == m.rope_theta);
      if ((item.key() == "rope_type" || item.key() == "type") && v == "default") continue;
      if (item.key() == "rope_theta" && v.is_number() && same_theta) {
        m.rope_theta = v.get<double>();
        continue;
      }
      if (item.key() == "partial_rotary_factor" && v.is_number() &&
          (!fields.has("partial_rotary_factor") || v.get<double>() == m.partial_rotary)) {
        m.partial_rotary = v.get<double>();
        continue;
      }
      fields.fail(key, fmt::format("has {} = {}: lrmoe implements unscaled RoPE (rope_type "
                                   "\"default\") with one rope_theta and partial_rotary_factor",
                                   item.key(), v.dump()));
    }
  }
  if (family == HfFamily::Qwen3Moe && m.partial_rotary != 1.0) {
    fields.fail("partial_rotary_factor",
                "is not 1, and transformers' Qwen3-MoE rotates every dimension whatever it says; "
                "remove it");
  }
}

// The fields both families share: the attention, norms, embeddings and expert sizes.
// Where transformers' configuration classes have a default that is no other field's, lrmoe takes
// the same: Qwen3MoeConfig's and Glm4MoeConfig's differ in the KV heads and the norms' epsilon.
void read_common(Fields& fields, HfFamily family, ModelConfig& m) {
  const bool glm = family == HfFamily::Glm4Moe;
  m.vocab_size = fields.integer("vocab_size", std::nullopt);
  m.hidden_size = fields.integer("hidden_size", std::nullopt);
  m.num_layers = fields.integer("num_hidden_layers", std::nullopt);
  m.num_heads = fields.integer("num_attention_heads", std::nullopt);
  m.num_kv_heads = fields.integer("num_key_value_heads", glm ? 8 : 4);
  if (m.num_heads <= 0) fields.fail("num_attention_heads", "must be at least 1");
  m.head_dim = fields.integer("head_dim", m.hidden_size / m.num_heads);
  m.rms_eps = fields.real("rms_norm_eps", glm ? 1e-5 : 1e-6);
  m.dense_ffn_size = fields.integer("intermediate_size", std::nullopt);
  m.expert_ffn_size = fields.integer("moe_intermediate_size", std::nullopt);
  m.top_k = fields.integer("num_experts_per_tok", std::nullopt);
  m.tie_embeddings = fields.flag("tie_word_embeddings", false);
  m.init_std = fields.real("initializer_range", 0.02);
  fields.require("hidden_act", "silu", "lrmoe's experts and dense layers are SwiGLU (silu)");
  fields.require("attention_dropout", 0.0, "lrmoe trains without attention dropout");
}

void read_qwen3(Fields& fields, ModelConfig& m) {
  // transformers 4 spells the expert count num_experts, 5 num_local_experts.
  const bool v4 = fields.has("num_experts");
  m.num_experts = fields.integer(v4 ? "num_experts" : "num_local_experts", std::nullopt);
  if (v4 && fields.has("num_local_experts") &&
      fields.integer("num_local_experts", std::nullopt) != m.num_experts) {
    fields.fail("num_local_experts", "differs from num_experts; keep one");
  }
  m.qk_norm = true;  // Qwen3 always normalises queries and keys per head
  m.router = RouterKind::Softmax;
  m.norm_topk = fields.flag("norm_topk_prob", false);
  m.aux_loss_coef = fields.real("router_aux_loss_coef", 0.001);
  fields.require("attention_bias", false,
                 "Qwen3-MoE's attention bias includes o_proj's, which lrmoe does not implement");
  fields.require("use_sliding_window", false, "lrmoe implements full causal attention");
  if (!fields.flag("use_sliding_window", false)) {
    (void)fields.take("sliding_window");  // unused without use_sliding_window
    (void)fields.take("max_window_layers");
  }
  fields.require("decoder_sparse_step", 1,
                 "lrmoe builds MoE layers after a prefix of dense ones (mlp_only_layers), not "
                 "every n-th layer");
  const json& dense = fields.take("mlp_only_layers");
  if (!dense.is_null()) {
    if (!dense.is_array()) fields.fail("mlp_only_layers", "must be a list of layer indices");
    for (std::size_t i = 0; i < dense.size(); ++i) {
      if (dense[i] != json(i)) {
        fields.fail("mlp_only_layers",
                    "= " + dense.dump() +
                        ": lrmoe builds dense layers only as the first k (0, 1, ..., k-1)");
      }
    }
    m.first_k_dense = static_cast<int64_t>(dense.size());
  }
}

void read_glm4(Fields& fields, ModelConfig& m) {
  m.num_experts = fields.integer("n_routed_experts", std::nullopt);
  m.shared_experts = fields.integer("n_shared_experts", 1);
  m.first_k_dense = fields.integer("first_k_dense_replace", 1);
  m.qk_norm = fields.flag("use_qk_norm", false);
  m.qkv_bias = fields.flag("attention_bias", false);
  m.router = RouterKind::Sigmoid;
  m.norm_topk = fields.flag("norm_topk_prob", true);
  m.routed_scaling_factor = fields.real("routed_scaling_factor", 1.0);
  // GLM-4.5 balances its experts with the selection bias (e_score_correction_bias), updated
  // without an auxiliary loss: lrmoe's update at DeepSeek-V3's rate, as the glm45 presets.
  m.aux_loss_coef = 0.0;
  m.bias_update_rate = 1e-3;
  const int64_t groups = fields.integer("n_group", 1);
  const int64_t chosen = fields.integer("topk_group", 1);
  if (groups != chosen) {
    fields.fail("topk_group", fmt::format("= {} of n_group = {}: lrmoe does not implement "
                                          "group-limited routing (set both to 1)",
                                          chosen, groups));
  }
  // transformers builds no multi-token-prediction layer either: their weights are skipped.
  for (const char* key : {"num_nextn_predict_layers", "num_mtp_layers"}) (void)fields.take(key);
}

}  // namespace

const char* hf_architecture(HfFamily family) {
  return family == HfFamily::Qwen3Moe ? "Qwen3MoeForCausalLM" : "Glm4MoeForCausalLM";
}

fs::path hf_config_file(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) ? path / "config.json" : path;
}

HfModel read_hf_config(const fs::path& path) {
  const fs::path file = hf_config_file(path);
  const json object = parse_file(file);
  Fields fields(object, file);
  HfModel hf;
  hf.family = family_of(fields);
  ModelConfig& m = hf.model;
  m.hf_config = path.string();
  read_common(fields, hf.family, m);
  read_rope(fields, hf.family, m);
  if (hf.family == HfFamily::Qwen3Moe) {
    read_qwen3(fields, m);
  } else {
    read_glm4(fields, m);
    for (const char* key : {"num_nextn_predict_layers", "num_mtp_layers"}) {
      const json& v = object.contains(key) ? object.at(key) : json();
      if (v.is_number_integer() && v.get<int64_t>() > 0) {
        hf.notes.push_back(fmt::format(
            "{}: {} = {}: the multi-token-prediction layers are not built (transformers does "
            "not build them either); their weights are not read",
            file.string(), key, v.get<int64_t>()));
      }
    }
  }
  fields.refuse_unread();
  if (!(m.partial_rotary >= 0 && m.partial_rotary <= 1))
    fields.fail("partial_rotary_factor",
                fmt::format("= {}: must be from 0 to 1", m.partial_rotary));
  const double rotary = static_cast<double>(m.head_dim) * m.partial_rotary;
  if (rotary != std::floor(rotary) || std::fmod(rotary, 2.0) != 0) {
    fields.fail("partial_rotary_factor",
                fmt::format("x head_dim {} = {} rotated dimensions: must be an even whole number",
                            m.head_dim, rotary));
  }
  return hf;
}

std::optional<HfFamily> hf_family(const ModelConfig& m, std::string* why_not) {
  auto no = [&](const std::string& why) {
    if (why_not != nullptr) *why_not = why;
    return std::nullopt;
  };
  if (m.moe_as_dense)
    return no("model.moe_as_dense = true: its MoE layers are dense FFNs, which neither family has");
  if (m.router == RouterKind::Sigmoid) return HfFamily::Glm4Moe;
  // A softmax router: Qwen3-MoE, whose attention and experts are fixed.
  if (!m.qk_norm)
    return no("model.qk_norm = false: Qwen3-MoE (the softmax-router family) always has it");
  if (m.qkv_bias) return no("model.qkv_bias = true: Qwen3-MoE's bias would include o_proj's");
  if (m.partial_rotary != 1.0)
    return no("model.partial_rotary is not 1: Qwen3-MoE rotates every dimension");
  if (m.shared_experts > 0)
    return no("model.shared_experts > 0: Qwen3-MoE (a softmax router) has no shared experts");
  if (m.routed_scaling_factor != 1.0)
    return no("model.routed_scaling_factor is not 1: Qwen3-MoE does not scale its gates");
  if (m.bias_update_rate > 0)
    return no("model.bias_update_rate > 0: Qwen3-MoE's router has no selection bias");
  return HfFamily::Qwen3Moe;
}

std::string hf_config_json(const ModelConfig& m, HfFamily family, const std::string& dtype) {
  // Written in transformers 4's spelling, which 5 reads too, keys in alphabetical order as
  // save_pretrained writes them.
  json c;
  c["architectures"] = {hf_architecture(family)};
  c["model_type"] = family == HfFamily::Qwen3Moe ? "qwen3_moe" : "glm4_moe";
  c["vocab_size"] = m.vocab_size;
  c["hidden_size"] = m.hidden_size;
  c["num_hidden_layers"] = m.num_layers;
  c["num_attention_heads"] = m.num_heads;
  c["num_key_value_heads"] = m.num_kv_heads;
  c["head_dim"] = m.head_dim;
  c["hidden_act"] = "silu";
  c["attention_dropout"] = 0.0;
  c["rms_norm_eps"] = m.rms_eps;
  c["rope_theta"] = m.rope_theta;
  c["rope_scaling"] = nullptr;
  c["intermediate_size"] = m.dense_ffn_size;
  c["moe_intermediate_size"] = m.expert_ffn_size;
  c["num_experts_per_tok"] = m.top_k;
  c["norm_topk_prob"] = m.norm_topk;
  c["tie_word_embeddings"] = m.tie_embeddings;
  c["initializer_range"] = m.init_std;
  c["torch_dtype"] = dtype;
  c["use_cache"] = true;
  if (family == HfFamily::Qwen3Moe) {
    c["num_experts"] = m.num_experts;
    c["attention_bias"] = false;
    c["use_sliding_window"] = false;
    c["decoder_sparse_step"] = 1;
    std::vector<int64_t> dense;
    for (int64_t i = 0; i < m.first_k_dense; ++i) dense.push_back(i);
    c["mlp_only_layers"] = dense;
    c["router_aux_loss_coef"] = m.aux_loss_coef;
    c["max_position_embeddings"] = 40960;
  } else {
    c["n_routed_experts"] = m.num_experts;
    c["n_shared_experts"] = m.shared_experts;
    c["first_k_dense_replace"] = m.first_k_dense;
    c["use_qk_norm"] = m.qk_norm;
    c["attention_bias"] = m.qkv_bias;
    c["partial_rotary_factor"] = m.partial_rotary;
    c["routed_scaling_factor"] = m.routed_scaling_factor;
    c["n_group"] = 1;
    c["topk_group"] = 1;
    c["num_nextn_predict_layers"] = 0;
    c["max_position_embeddings"] = 131072;
  }
  return c.dump(2) + "\n";
}

}  // namespace lrmoe
