// Models from Hugging Face config.json files (Note [Hugging Face models]): the shipped full-size
// configs give today's presets, both spellings of transformers read alike, every field that
// changes the computation is read or refused by name, and what lrmoe writes reads back.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/config/experiment_loader.hpp"
#include "core/config/hf_model_config.hpp"
#include "core/config/model_presets.hpp"
#include "runner/run_info.hpp"
#include "support/temp_folder.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using lrmoe::ConfigError;
using lrmoe::HfFamily;
using lrmoe::ModelConfig;
using lrmoe_test::TempFolder;
using nlohmann::json;

namespace {

const fs::path kModels = fs::path(LRMOE_SOURCE_DIR) / "experiments" / "models";

// The experiment as resolved TOML, without the line naming where the model came from.
std::string resolved_model(const std::string& model_line) {
  std::string toml =
      lrmoe::to_toml(lrmoe::load_experiment_text("[model]\n" + model_line + "\n", "model.toml"));
  const std::size_t source = toml.find(model_line);
  REQUIRE(source != std::string::npos);
  return toml.erase(source, model_line.size() + 1);
}

json shipped(const std::string& model) {
  std::ifstream in(kModels / model / "config.json");
  return json::parse(in);
}

// The ConfigError of reading `config` as a config.json, or a note that there was none.
std::string refusal(const json& config) {
  TempFolder folder;
  const fs::path file = folder.write("config.json", config.dump());
  try {
    (void)lrmoe::read_hf_config(file);
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    CHECK_THAT(message, StartsWith(file.string() + ": "));
    return message;
  }
  return "<no ConfigError>";
}

// Every field the two models may differ in, beside their source.
bool same_model(ModelConfig a, ModelConfig b) {
  a.preset = b.preset = "";
  a.hf_config = b.hf_config = "";
  return lrmoe::hf_config_json(a, HfFamily::Glm4Moe, "float32") ==
             lrmoe::hf_config_json(b, HfFamily::Glm4Moe, "float32") &&
         a.aux_loss_coef == b.aux_loss_coef && a.bias_update_rate == b.bias_update_rate &&
         a.z_loss_coef == b.z_loss_coef && a.router == b.router;
}

}  // namespace

TEST_CASE("the shipped config.json files resolve to the experiment of the full-size presets",
          "[config][hf]") {
  for (const auto& [preset, folder] :
       {std::pair{"qwen3-30b-a3b", "qwen3-30b-a3b"}, std::pair{"glm45-air", "glm45-air"}}) {
    DYNAMIC_SECTION(preset) {
      const std::string from_config =
          resolved_model("hf_config = \"" + (kModels / folder).string() + "\"");
      CHECK(from_config == resolved_model(std::string("preset = \"") + preset + "\""));
    }
  }
}

TEST_CASE("transformers 5's spelling of a config.json reads as transformers 4's", "[config][hf]") {
  json v4 = shipped("glm45-air");
  json v5 = v4;
  v5.erase("rope_theta");
  v5.erase("rope_scaling");
  v5.erase("partial_rotary_factor");
  v5["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 1e6}, {"partial_rotary_factor", 0.5}};
  TempFolder folder;
  const ModelConfig a = lrmoe::read_hf_config(folder.write("a/config.json", v4.dump())).model;
  const ModelConfig b = lrmoe::read_hf_config(folder.write("b/config.json", v5.dump())).model;
  CHECK(same_model(a, b));

  json qwen = shipped("qwen3-30b-a3b");
  qwen["num_local_experts"] = qwen["num_experts"];
  qwen.erase("num_experts");
  const ModelConfig q = lrmoe::read_hf_config(folder.write("q/config.json", qwen.dump())).model;
  CHECK(q.num_experts == 128);
}

TEST_CASE(
    "a config.json field that changes the computation and is not implemented is refused "
    "by name",
    "[config][hf]") {
  struct Case {
    std::string model, field;
    json value;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"qwen3-30b-a3b", "hidden_act", "gelu", "field 'hidden_act' = \"gelu\": lrmoe's experts"},
      {"qwen3-30b-a3b",
       "rope_scaling",
       {{"rope_type", "yarn"}, {"factor", 4}},
       "field 'rope_scaling' has factor = 4"},
      {"qwen3-30b-a3b", "use_sliding_window", true, "field 'use_sliding_window' = true"},
      {"qwen3-30b-a3b", "attention_bias", true, "o_proj's, which lrmoe does not implement"},
      {"qwen3-30b-a3b", "decoder_sparse_step", 2, "field 'decoder_sparse_step' = 2"},
      {"qwen3-30b-a3b", "mlp_only_layers", {1, 3}, "only as the first k"},
      {"qwen3-30b-a3b", "partial_rotary_factor", 0.5, "Qwen3-MoE rotates every dimension"},
      {"qwen3-30b-a3b", "attention_dropout", 0.1, "without attention dropout"},
      {"qwen3-30b-a3b",
       "quantization_config",
       {{"bits", 4}},
       "field 'quantization_config' is "
       "not a field lrmoe reads"},
      {"glm45-air", "topk_group", 4, "group-limited routing"},
      {"glm45-air", "model_type", "deepseek_v3", "lrmoe builds \"qwen3_moe\""},
      {"glm45-air", "num_attention_heads", "96", "must be an integer, got \"96\""},
      {"glm45-air", "vocab_size", uint64_t{1} << 63, "past the largest integer lrmoe holds"},
      {"glm45-air", "partial_rotary_factor", 1e300, "must be from 0 to 1"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.model << " " << c.field << " = " << c.value.dump()) {
      json config = shipped(c.model);
      config[c.field] = c.value;
      CHECK_THAT(refusal(config), Contains(c.says));
    }
  }
  SECTION("rope_scaling and rope_parameters together") {
    json config = shipped("glm45-air");
    config["rope_scaling"] = {{"rope_type", "default"}};
    config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
    CHECK_THAT(refusal(config),
               Contains("field 'rope_scaling' and rope_parameters are both given"));
  }
  SECTION("an absent field takes transformers' default for its family") {
    json glm = shipped("glm45-air");
    glm.erase("num_key_value_heads");
    glm.erase("rms_norm_eps");
    glm.erase("partial_rotary_factor");
    TempFolder folder;
    const ModelConfig g = lrmoe::read_hf_config(folder.write("g.json", glm.dump())).model;
    CHECK(g.num_kv_heads == 8);
    CHECK(g.rms_eps == 1e-5);
    CHECK(g.partial_rotary == 0.5);
    json qwen = shipped("qwen3-30b-a3b");
    qwen.erase("num_key_value_heads");
    qwen.erase("rms_norm_eps");
    qwen.erase("norm_topk_prob");
    const ModelConfig q = lrmoe::read_hf_config(folder.write("q.json", qwen.dump())).model;
    CHECK(q.num_kv_heads == 4);
    CHECK(q.rms_eps == 1e-6);
    CHECK_FALSE(q.norm_topk);
  }
  SECTION("a missing field the model cannot be built without") {
    json config = shipped("glm45-air");
    config.erase("n_routed_experts");
    CHECK_THAT(refusal(config), Contains("field 'n_routed_experts' is missing"));
  }
}

TEST_CASE("a file that is not a config.json is refused naming it", "[config][hf]") {
  CHECK_THAT(refusal(json::array({1, 2})), Contains("a config.json is one JSON object"));
  TempFolder folder;
  const fs::path broken = folder.write("broken.json", "{\"vocab_size\": ");
  CHECK_THROWS_WITH(lrmoe::read_hf_config(broken),
                    StartsWith(broken.string() + ": not valid JSON"));
  // Found by fuzz_hf_files: a number past a double is the parser's out_of_range, not a syntax
  // error.
  const fs::path huge = folder.write("huge.json", "{\"rope_theta\": 1e806}");
  CHECK_THROWS_WITH(lrmoe::read_hf_config(huge),
                    StartsWith(huge.string() + ": not valid JSON") && Contains("1e806"));
  CHECK_THROWS_WITH(lrmoe::read_hf_config(folder.path() / "none"),
                    StartsWith((folder.path() / "none").string() + ": cannot read it"));
  // A folder stands for its config.json.
  CHECK_THROWS_WITH(lrmoe::read_hf_config(folder.path()),
                    StartsWith((folder.path() / "config.json").string() + ": cannot read it"));
}

TEST_CASE("a config.json value out of the schema's range is refused at the experiment's key",
          "[config][hf]") {
  json config = shipped("qwen3-30b-a3b");
  config["num_hidden_layers"] = 100000;
  TempFolder folder;
  const fs::path file = folder.write("config.json", config.dump());
  const fs::path experiment =
      folder.write("e.toml", "[model]\nhf_config = \"" + file.string() + "\"\n");
  CHECK_THROWS_WITH(lrmoe::load_experiment(experiment),
                    StartsWith(experiment.string() + ":2:13: ") &&
                        Contains("gives model.num_layers = 100000, which must be"));
  config = shipped("qwen3-30b-a3b");
  config["hidden_act"] = "relu";
  folder.write("config.json", config.dump());
  CHECK_THROWS_WITH(
      lrmoe::load_experiment(experiment),
      StartsWith(experiment.string() + ":2:13: " + file.string() + ": field 'hidden_act'"));
}

TEST_CASE("the config.json lrmoe writes reads back as the same model", "[config][hf]") {
  for (const std::string preset : {"tiny-moe", "qwen3-mini", "glm45-mini", "glm45-air"}) {
    DYNAMIC_SECTION(preset) {
      ModelConfig model = *lrmoe::find_preset(preset);
      if (model.vocab_size == 0) model.vocab_size = 1000;
      std::string why;
      const auto family = lrmoe::hf_family(model, &why);
      REQUIRE(family);
      TempFolder folder;
      const fs::path file =
          folder.write("config.json", lrmoe::hf_config_json(model, *family, "bfloat16"));
      const lrmoe::HfModel back = lrmoe::read_hf_config(file);
      CHECK(back.family == *family);
      CHECK(same_model(back.model, model));
    }
  }
}

TEST_CASE("a model without a transformers counterpart says which key", "[config][hf]") {
  ModelConfig model = *lrmoe::find_preset("tiny-moe");
  model.shared_experts = 1;
  std::string why;
  CHECK_FALSE(lrmoe::hf_family(model, &why));
  CHECK_THAT(why, Contains("model.shared_experts > 0"));
  model = *lrmoe::find_preset("tiny-moe");
  model.qk_norm = false;
  CHECK_FALSE(lrmoe::hf_family(model, &why));
  CHECK_THAT(why, Contains("model.qk_norm = false"));
}

TEST_CASE(
    "an experiment from a config.json keeps its own keys on top and reloads from its "
    "resolved TOML",
    "[config][hf]") {
  const std::string config = (kModels / "glm45-air").string();
  const lrmoe::Experiment e =
      lrmoe::load_experiment_text("[model]\nhf_config = \"" + config + "\"\nnum_layers = 4\n",
                                  "e.toml", {"model.hidden_size=256"});
  CHECK(e.model.num_layers == 4);
  CHECK(e.model.hidden_size == 256);
  CHECK(e.model.num_experts == 128);
  CHECK(e.model.preset.empty());
  CHECK(lrmoe::model_name(e.model) == "hf:glm45-air");
  const std::string toml = lrmoe::to_toml(e);
  CHECK_THAT(toml, Contains("hf_config = \"" + config + "\""));
  CHECK_THAT(toml, !Contains("preset = "));
  CHECK(lrmoe::to_toml(lrmoe::load_experiment_text(toml, "resolved.toml")) == toml);
  // A resolved TOML names every model key, so its config.json is not read again: it may be gone.
  TempFolder folder;
  const fs::path copy = folder.path() / "model" / "config.json";
  fs::create_directories(copy.parent_path());
  fs::copy_file(kModels / "glm45-air" / "config.json", copy);
  const std::string resolved = lrmoe::to_toml(
      lrmoe::load_experiment_text("[model]\nhf_config = \"" + copy.string() + "\"\n", "e.toml"));
  fs::remove_all(copy.parent_path());
  CHECK(lrmoe::to_toml(lrmoe::load_experiment_text(resolved, "resolved.toml")) == resolved);
  // Both sources in one file have no order to decide by.
  const fs::path both =
      folder.write("both.toml", "[model]\npreset = \"tiny-moe\"\nhf_config = \"" + config + "\"\n");
  CHECK_THROWS_WITH(lrmoe::load_experiment(both),
                    Contains("model.preset and model.hf_config both name the model in this file; "
                             "keep one") ||
                        Contains("model.hf_config and model.preset both name the model"));
  // The last source named wins: a --set preset replaces the config.json.
  const lrmoe::Experiment preset = lrmoe::load_experiment_text(
      "[model]\nhf_config = \"" + config + "\"\n", "e.toml", {"model.preset=tiny-moe"});
  CHECK(preset.model.hidden_size == 64);
  CHECK(preset.model.hf_config.empty());
}
