// Experiments from TOML: presets and overrides, defaults, `extends`, --set, the resolved TOML
// round trip, and the place and wording of every kind of configuration error.
#include <sys/stat.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/config/byte_size.hpp"
#include "core/config/did_you_mean.hpp"
#include "core/config/experiment_loader.hpp"
#include "core/config/experiment_schema.hpp"
#include "core/config/memory_spec.hpp"
#include "core/config/model_presets.hpp"
#include "core/config/policy_sections.hpp"
#include "support/temp_folder.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using lrmoe::ConfigError;
using lrmoe::Experiment;
using lrmoe::load_experiment;
using lrmoe::load_experiment_text;
using lrmoe::to_toml;
using lrmoe_test::TempFolder;

namespace {

// The message of the ConfigError that `load` throws, or a note that it threw none.
std::string config_error(const std::function<void()>& load) {
  try {
    load();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no ConfigError>";
}

// The error of loading `text` as the file `bad.toml` in a fresh folder; the message starts with
// that file's path.
struct FileError {
  std::string message;
  std::string file;
};
FileError file_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  TempFolder folder;
  const fs::path file = folder.write("bad.toml", text);
  return {config_error([&] { load_experiment(file, overrides); }), file.string()};
}

const std::string kTinyModel = "[model]\npreset = \"tiny-moe\"\n";

Experiment tiny_with(const std::vector<std::string>& overrides) {
  return load_experiment_text(kTinyModel, "tiny.toml", overrides);
}

}  // namespace

TEST_CASE("a file resolves to its preset's dimensions with its own keys on top", "[config]") {
  TempFolder folder;
  const fs::path file = folder.write("glm.toml", R"(
[experiment]
name = "glm-wide"
seed = 7

[model]
preset = "glm45-mini"
hidden_size = 256
router = "softmax"

[train]
lr = 1      # an integer where a float is expected
max_steps = 50
warmup_steps = 5

[cluster]
ranks = 4
memory_per_rank = "64MiB"
)");
  const Experiment e = load_experiment(file);
  const lrmoe::ModelConfig preset = *lrmoe::find_preset("glm45-mini");
  CHECK(e.experiment.name == "glm-wide");
  CHECK(e.experiment.seed == 7);
  CHECK(e.model.preset == "glm45-mini");
  CHECK(e.model.hidden_size == 256);
  CHECK(e.model.router == lrmoe::RouterKind::Softmax);
  CHECK(e.model.num_layers == preset.num_layers);
  CHECK(e.model.num_experts == preset.num_experts);
  CHECK(e.model.shared_experts == preset.shared_experts);
  CHECK(e.model.first_k_dense == preset.first_k_dense);
  CHECK(e.model.partial_rotary == preset.partial_rotary);
  CHECK(e.model.bias_update_rate == preset.bias_update_rate);
  CHECK(e.train.lr == 1.0);
  CHECK(e.train.max_steps == 50);
  CHECK(e.train.warmup_steps == 5);
  CHECK(e.cluster.ranks == 4);
  CHECK(e.cluster.memory_per_rank == "64MiB");
}

TEST_CASE("keys that are not given keep the defaults of experiment.hpp", "[config]") {
  const Experiment e = load_experiment_text(kTinyModel, "tiny.toml");
  Experiment expected;
  expected.model = *lrmoe::find_preset("tiny-moe");
  lrmoe::apply_bundle(expected.policies);  // the default bundle names the policies
  CHECK(to_toml(e) == to_toml(expected));
  CHECK(e.data.kind == lrmoe::DataKind::Synthetic);
  CHECK(e.data.vocab_size == 512);
  CHECK(e.train.lr == 3e-3);
  CHECK(e.cluster.memory_per_rank == "80GiB");
  CHECK(e.store.path == "lrmoe.db");
}

TEST_CASE("extends chains files, each path relative to the file that names it", "[config]") {
  TempFolder folder;
  folder.write("bases/root.toml", R"(
[experiment]
notes = "from the root"
[model]
preset = "qwen3-mini"
num_layers = 6
[train]
lr = 1e-3
max_steps = 300
)");
  folder.write("bases/more/middle.toml", R"(
extends = "../root.toml"
[model]
hidden_size = 96
[train]
max_steps = 200
)");
  const fs::path leaf = folder.write("runs/leaf.toml", R"(
extends = "../bases/more/middle.toml"
[experiment]
name = "leaf"
[train]
max_steps = 100
)");
  const Experiment e = load_experiment(leaf);
  CHECK(e.experiment.name == "leaf");
  CHECK(e.experiment.notes == "from the root");
  CHECK(e.model.preset == "qwen3-mini");
  CHECK(e.model.num_layers == 6);
  CHECK(e.model.hidden_size == 96);
  CHECK(e.model.num_experts == 128);
  CHECK(e.train.lr == 1e-3);
  CHECK(e.train.max_steps == 100);

  SECTION("text that is not a file resolves extends against its base folder") {
    const Experiment from_text =
        load_experiment_text("extends = \"runs/leaf.toml\"\n", "<embedded>", {}, folder.path());
    CHECK(to_toml(from_text) == to_toml(e));
  }
}

TEST_CASE("explicit model keys override the preset whichever layer names it", "[config]") {
  TempFolder folder;
  folder.write("base.toml", R"(
[model]
preset = "glm45-mini"
hidden_size = 96
)");
  const fs::path leaf = folder.write("leaf.toml", R"(
extends = "base.toml"
[model]
preset = "tiny-moe"
)");
  const Experiment e = load_experiment(leaf);
  CHECK(e.model.preset == "tiny-moe");
  CHECK(e.model.num_experts == 8);
  CHECK(e.model.hidden_size == 96);

  const Experiment overridden = load_experiment(leaf, {"model.preset=qwen3-mini"});
  CHECK(overridden.model.preset == "qwen3-mini");
  CHECK(overridden.model.num_experts == 128);
  CHECK(overridden.model.hidden_size == 96);
}

TEST_CASE("command-line overrides (--set) take every kind of value", "[config]") {
  const Experiment e = tiny_with({
      "model.hidden_size=48",
      "train.lr=2.5e-4",
      "train.min_lr=0",
      "model.qk_norm=false",
      "experiment.name=\"quoted name\"",
      "data.path=/tmp/lrmoe/x.bin",
      "data.kind=tokens",
      "data.vocab_size=300",
      "model.router=sigmoid",
      "cluster.memory_per_rank=512KiB",
      "experiment.notes=2024",
      " train.max_steps = 40 ",
      "train.max_steps=30",
  });
  CHECK(e.model.hidden_size == 48);
  CHECK(e.train.lr == 2.5e-4);
  CHECK(e.train.min_lr == 0.0);
  CHECK_FALSE(e.model.qk_norm);
  CHECK(e.experiment.name == "quoted name");
  CHECK(e.data.path == "/tmp/lrmoe/x.bin");
  CHECK(e.data.kind == lrmoe::DataKind::Tokens);
  CHECK(e.data.vocab_size == 300);
  CHECK(e.model.router == lrmoe::RouterKind::Sigmoid);
  CHECK(lrmoe::parse_memory_spec(e.cluster.memory_per_rank).bytes == 512u * 1024u);
  CHECK(e.experiment.notes == "2024");
  CHECK(e.train.max_steps == 30);
}

TEST_CASE(
    "to_toml writes every field but the unused model source, and loading it gives the same "
    "experiment",
    "[config]") {
  for (const std::string& preset : lrmoe::preset_names()) {
    DYNAMIC_SECTION("preset " << preset) {
      const Experiment e =
          load_experiment_text("[model]\npreset = \"" + preset + "\"\n", "preset.toml");
      const std::string toml = to_toml(e);
      CHECK_THAT(toml, Contains("preset = \"" + preset + "\""));
      CHECK_THAT(toml, Contains("hidden_size = " + std::to_string(e.model.hidden_size)));
      CHECK_THAT(toml, !Contains("extends"));
      for (const lrmoe::FieldDescriptor& field : lrmoe::experiment_schema()) {
        // A model comes from its preset or its config.json, and names only that one.
        if (&field == &lrmoe::model_hf_config_field()) {
          CHECK_THAT(toml, !Contains("\n" + field.key + " = "));
          continue;
        }
        CHECK_THAT(toml, Contains("\n" + field.key + " = "));
      }
      const Experiment again = load_experiment_text(toml, "resolved.toml");
      CHECK(to_toml(again) == toml);
      CHECK(again.model.rope_theta == e.model.rope_theta);
      CHECK(again.model.rms_eps == e.model.rms_eps);
      CHECK(again.model.router == e.model.router);
    }
  }

  SECTION("awkward values survive the round trip bit for bit") {
    const Experiment e = tiny_with({
        "train.lr=0.30000000000000004",
        "train.min_lr=1e-300",
        "model.init_std=0.1",
        "model.rope_theta=1e20",
        "experiment.notes=\"tab\\tquote\\\" backslash\\\\ newline\\n é ''' end\"",
        "experiment.seed=9007199254740993",
        "cluster.memory_per_rank=1500MB",
        "data.kind=text",
        "data.path=corpus dir/",
    });
    const std::string toml = to_toml(e);
    const Experiment again = load_experiment_text(toml, "resolved.toml");
    CHECK(again.train.lr == e.train.lr);
    CHECK(again.train.min_lr == e.train.min_lr);
    CHECK(again.model.init_std == 0.1);
    CHECK(again.model.rope_theta == 1e20);
    CHECK(again.experiment.notes == "tab\tquote\" backslash\\ newline\n é ''' end");
    CHECK(again.experiment.seed == 9007199254740993ull);
    CHECK(again.cluster.memory_per_rank == "1500MB");
    CHECK_THAT(toml, Contains("memory_per_rank = \"1500MB\""));
    CHECK(to_toml(again) == toml);
  }
}

TEST_CASE("every experiment in experiments/ validates", "[config]") {
  int loaded = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(LRMOE_SOURCE_DIR) / "experiments")) {
    if (entry.path().extension() != ".toml") continue;
    INFO(entry.path().string());
    CHECK_NOTHROW(load_experiment(entry.path()));
    ++loaded;
  }
  CHECK(loaded > 0);
}

TEST_CASE("schema_markdown has a row for every field", "[config]") {
  const std::string markdown = lrmoe::schema_markdown();
  CHECK_THAT(markdown,
             StartsWith("| section | key | type | default | range / choices | meaning |"));
  for (const lrmoe::FieldDescriptor& field : lrmoe::experiment_schema()) {
    CHECK_THAT(markdown, Contains("| " + field.section + " | " + field.key + " | "));
  }
  CHECK_THAT(markdown, Contains("| train | lr | float | 0.003 | > 0 and <= 1e+38 | "));
  CHECK_THAT(markdown, Contains("| cluster | memory_per_rank | string | \"80GiB\" |"));
  CHECK_THAT(markdown, Contains("`softmax`, `sigmoid`"));
}

TEST_CASE("byte sizes read binary and decimal units and write the shortest exact form",
          "[config]") {
  CHECK(lrmoe::parse_byte_size("512KiB") == 512ull << 10);
  CHECK(lrmoe::parse_byte_size("64MiB") == 64ull << 20);
  CHECK(lrmoe::parse_byte_size("80GiB") == 80ull << 30);
  CHECK(lrmoe::parse_byte_size("1TiB") == 1ull << 40);
  CHECK(lrmoe::parse_byte_size("3 KB") == 3000);
  CHECK(lrmoe::parse_byte_size("2gb") == 2000000000ull);
  CHECK(lrmoe::parse_byte_size("1000") == 1000);
  CHECK(lrmoe::format_byte_size(80ull << 30) == "80GiB");
  CHECK(lrmoe::format_byte_size(2000000000ull) == "2GB");
  CHECK(lrmoe::format_byte_size(1001) == "1001B");
  CHECK(lrmoe::format_byte_size(0) == "0B");
  CHECK_THROWS_WITH(lrmoe::parse_byte_size("12XB"), Contains("unknown unit 'XB'"));
  CHECK(lrmoe::parse_byte_size("1.5GiB") == 3ull << 29);
  CHECK(lrmoe::parse_byte_size("2.5 GB") == 2500000000ull);
  CHECK(lrmoe::parse_byte_size("0.25KiB") == 256);
  CHECK(lrmoe::parse_byte_size("1.0") == 1);
  CHECK_THROWS_WITH(lrmoe::parse_byte_size("0.3KiB"), Contains("not a whole number of bytes"));
  CHECK_THROWS_WITH(lrmoe::parse_byte_size("1.5B"), Contains("not a whole number of bytes"));
  CHECK(lrmoe::parse_byte_size("0.000001TB") == 1000000);
  CHECK_THROWS_WITH(lrmoe::parse_byte_size("1.0000001TB"), Contains("at most 6 decimals"));
  CHECK(lrmoe::parse_byte_size("16777215.5TiB") == (16777215ull << 40) + (1ull << 39));
  CHECK_THROWS_WITH(lrmoe::parse_byte_size("16777216TiB"), Contains("too large"));
  CHECK_THROWS_WITH(lrmoe::parse_byte_size(".5GiB"), Contains("expected a number"));
  CHECK_THROWS_WITH(lrmoe::parse_byte_size("1.GiB"), Contains("unknown unit '.GiB'"));
  CHECK_THROWS_WITH(lrmoe::parse_byte_size("GiB"), Contains("expected a number"));
  CHECK_THROWS_WITH(lrmoe::parse_byte_size("99999999TiB"), Contains("too large"));
}

TEST_CASE("did-you-mean suggests only close names", "[config]") {
  const std::vector<std::string> keys = {"hidden_size", "num_heads", "head_dim"};
  CHECK(lrmoe::edit_distance("modle", "model") == 1);
  CHECK(lrmoe::did_you_mean("hiden_size", keys) == "; did you mean 'hidden_size'?");
  CHECK(lrmoe::did_you_mean("num_head", keys) == "; did you mean 'num_heads'?");
  CHECK(lrmoe::did_you_mean("colour", keys).empty());
  CHECK(lrmoe::did_you_mean("x", {"y"}).empty());
}

TEST_CASE("TOML syntax errors name the file, line and column", "[config]") {
  const FileError error = file_error(kTinyModel + "hidden_size = \n");
  CHECK_THAT(error.message, StartsWith(error.file + ":3:15: "));
  CHECK_THAT(error.message, Contains("expected value"));
}

TEST_CASE("unknown sections and keys suggest the name that was meant", "[config]") {
  SECTION("a misspelt key") {
    const FileError error = file_error(kTinyModel + "hiden_size = 64\n");
    CHECK(error.message == error.file +
                               ":3:1: unknown key 'hiden_size' in [model]; did you mean "
                               "'hidden_size'?");
  }
  SECTION("a key far from any valid one lists the valid keys") {
    const FileError error = file_error("[store]\ncolour = \"red\"\n" + kTinyModel);
    CHECK_THAT(error.message, StartsWith(error.file + ":2:1: unknown key 'colour' in [store]"));
    CHECK_THAT(error.message, Contains("valid keys: 'path'"));
  }
  SECTION("a misspelt section") {
    const FileError error = file_error(kTinyModel + "[trian]\nlr = 1e-3\n");
    CHECK(error.message == error.file + ":3:2: unknown section 'trian'; did you mean 'train'?");
  }
  SECTION("a section that is not a table") {
    const FileError error = file_error("train = 3\n" + kTinyModel);
    CHECK_THAT(error.message, StartsWith(error.file + ":1:1: train must be a table"));
  }
  SECTION("a policy named as a key of [policies] rather than in its own table") {
    const FileError error = file_error(kTinyModel + "[policies]\nplacement = \"greedy\"\n");
    CHECK_THAT(error.message,
               StartsWith(error.file + ":4:1: unknown key 'placement' in [policies]"));
  }
  SECTION("a plugin parameter that is not a plain value") {
    const FileError error = file_error(kTinyModel + "[policies.placement.symi]\nsizes = [1, 2]\n");
    CHECK_THAT(error.message, StartsWith(error.file + ":4:9: a plugin parameter must be"));
  }
  SECTION("a plugin parameter written in [policies.<kind>], where it would follow any choice") {
    const FileError error = file_error(kTinyModel + "[policies.placement]\nkeep_fraction = 0.5\n");
    CHECK_THAT(
        error.message,
        StartsWith(error.file + ":4:1: 'keep_fraction' is not a key of [policies.placement]") &&
            Contains("[policies.placement.PLUGIN] keep_fraction = ...") &&
            Contains("--set policies.placement.PLUGIN.keep_fraction=..."));
    CHECK_THAT(
        config_error([] { tiny_with({"policies.metric.power=2"}); }),
        StartsWith("--set policies.metric.power: 'power' is not a key of [policies.metric]"));
    // A near miss of `name` is a misspelt key, not a parameter.
    CHECK_THAT(file_error(kTinyModel + "[policies.metric]\nnmae = \"gate\"\n").message,
               Contains("unknown key 'nmae' in [policies.metric]; did you mean 'name'?"));
  }
}

TEST_CASE(
    "policies: a bundle names all four, tables override one, a plugin's parameters in its own "
    "table",
    "[config]") {
  SECTION("the default bundle is fixed ownership") {
    const Experiment e = tiny_with({});
    CHECK(e.policies.placement.name == "fixed_ownership");
    CHECK(e.policies.metric.name == "gate");
    CHECK(e.policies.selection.name == "keep_all");
    CHECK(e.policies.routing.name == "owner");
  }
  SECTION("--set policies.bundle picks another bundle; a named policy wins over it") {
    const Experiment e = tiny_with({"policies.bundle=lrmoe", "policies.routing.name=round_robin"});
    CHECK(e.policies.placement.name == "lrmoe");
    CHECK(e.policies.metric.name == "grad_contribution");
    CHECK(e.policies.selection.name == "quota_topk");
    CHECK(e.policies.routing.name == "round_robin");
  }
  SECTION("parameters keep their plugin, their type and where they were set; a later one wins") {
    const Experiment e =
        load_experiment_text(kTinyModel +
                                 "[policies]\nbundle = \"symi\"\n"
                                 "[policies.placement.symi]\ncapacity_factor = 2\n"
                                 "note = \"x\"\n"
                                 "[policies.placement.lrmoe]\nkeep_fraction = 0.5\n",
                             "p.toml", {"policies.placement.symi.capacity_factor=1.5"});
    const auto& settings = e.policies.placement.settings;
    REQUIRE(settings.size() == 2);
    CHECK(settings.at("symi").place == "p.toml:5:21");
    const auto& symi = e.policies.placement.chosen_parameters();
    REQUIRE(symi.size() == 2);
    CHECK(std::get<double>(symi.at("capacity_factor").value) == 1.5);
    CHECK(symi.at("capacity_factor").place == "--set policies.placement.symi.capacity_factor");
    CHECK(std::get<std::string>(symi.at("note").value) == "x");
    CHECK(symi.at("note").place == "p.toml:7:8");
    // The lrmoe placement's table is kept, though symi is the one chosen.
    CHECK(std::get<double>(settings.at("lrmoe").parameters.at("keep_fraction").value) == 0.5);
    // The resolved TOML names every plugin and keeps every plugin's table.
    const std::string toml = to_toml(e);
    CHECK_THAT(toml, Contains("[policies.placement]\nname = \"symi\"\n\n"
                              "[policies.placement.lrmoe]\nkeep_fraction = 0.5\n\n"
                              "[policies.placement.symi]\ncapacity_factor = 1.5\nnote = \"x\"\n"));
    CHECK(to_toml(load_experiment_text(toml, "again.toml")) == toml);
  }
  SECTION("an empty plugin table is kept, so that its plugin's name is still checked") {
    const Experiment e = load_experiment_text(kTinyModel + "[policies.routing.ownr]\n", "p.toml");
    REQUIRE(e.policies.routing.settings.count("ownr") == 1);
    CHECK(e.policies.routing.settings.at("ownr").parameters.empty());
    CHECK(e.policies.routing.settings.at("ownr").place == "p.toml:3:19");
  }
  SECTION("a parameter name that is not a bare TOML key is written quoted and reads back") {
    // Found by the set_override fuzzer: `#(` written bare read back as a comment.
    const Experiment e =
        tiny_with({"policies.placement.symi.#( x=1", "policies.metric.gate.a\"b=2"});
    const std::string toml = to_toml(e);
    CHECK_THAT(toml, Contains("\"#( x\" = 1\n") && Contains("\"a\\\"b\" = 2\n"));
    const Experiment again = load_experiment_text(toml, "again.toml");
    CHECK(again.policies.placement.settings.at("symi").parameters.count("#( x") == 1);
    CHECK(again.policies.metric.settings.at("gate").parameters.count("a\"b") == 1);
    CHECK(to_toml(again) == toml);
  }
}

TEST_CASE("values of the wrong type, range or choice are reported at the value", "[config]") {
  SECTION("a string where an integer is expected") {
    const FileError error = file_error(kTinyModel + "num_layers = \"four\"\n");
    CHECK(error.message == error.file + ":3:14: model.num_layers must be an integer, got string");
  }
  SECTION("a float where an integer is expected") {
    const FileError error = file_error(kTinyModel + "[train]\nbatch_size = 2.5\n");
    CHECK(error.message == error.file + ":4:14: train.batch_size must be an integer, got float");
  }
  SECTION("a string where a bool is expected") {
    const FileError error = file_error(kTinyModel + "qk_norm = \"yes\"\n");
    CHECK_THAT(error.message, StartsWith(error.file + ":3:11: model.qk_norm must be true or "
                                                      "false, got string"));
  }
  SECTION("out of range") {
    const FileError error = file_error(kTinyModel + "[train]\nlr = -1\n");
    CHECK(error.message == error.file + ":4:6: train.lr must be > 0 and <= 1e+38, got -1");
  }
  SECTION("a two-sided range") {
    const FileError error = file_error(kTinyModel + "[data]\nval_fraction = 1.5\n");
    CHECK(error.message == error.file + ":4:16: data.val_fraction must be > 0 and < 1, got 1.5");
  }
  SECTION("a misspelt choice") {
    const FileError error = file_error(kTinyModel + "router = \"sigmod\"\n");
    CHECK(error.message == error.file +
                               ":3:10: model.router must be one of 'softmax', 'sigmoid', got "
                               "'sigmod'; did you mean 'sigmoid'?");
  }
  SECTION("a misspelt preset") {
    const FileError error = file_error("[model]\npreset = \"qwen3-mni\"\n");
    CHECK_THAT(error.message, StartsWith(error.file + ":2:10: model.preset must be one of "));
    CHECK_THAT(error.message, Contains("'tiny-moe'"));
    CHECK_THAT(error.message, Contains("did you mean 'qwen3-mini'?"));
  }
  SECTION("a byte size with an unknown unit") {
    const FileError error = file_error(kTinyModel + "[cluster]\nmemory_per_rank = \"80GB2\"\n");
    CHECK_THAT(error.message,
               StartsWith(error.file + ":4:19: cluster.memory_per_rank: unknown unit 'GB2'"));
    CHECK_THAT(error.message, Contains("KiB, MiB, GiB, TiB"));
    CHECK_THAT(error.message, Contains("like \"0.8x fixed\""));
    CHECK_THAT(error.message, Contains("KB, MB, GB, TB"));
  }
  SECTION("a byte size of the wrong type") {
    const FileError error = file_error(kTinyModel + "[cluster]\nmemory_per_rank = 1.5\n");
    CHECK_THAT(error.message, StartsWith(error.file + ":4:19: cluster.memory_per_rank must be "
                                                      "a string"));
  }
  SECTION("a value a later layer overrides is still checked") {
    const FileError error = file_error(kTinyModel + "[train]\nlr = 0\n", {"train.lr=1e-3"});
    CHECK(error.message == error.file + ":4:6: train.lr must be > 0 and <= 1e+38, got 0");
  }
}

TEST_CASE("a model needs a preset or a config.json", "[config]") {
  const FileError error = file_error("[model]\nhidden_size = 64\n");
  CHECK_THAT(error.message, StartsWith(error.file + ":2:15: set model.preset to one of "));
  CHECK_THAT(error.message, Contains("'qwen3-mini'"));
  CHECK_THAT(error.message, Contains("or model.hf_config to a Hugging Face config.json"));

  const FileError no_model = file_error("[train]\nlr = 1e-3\n");
  CHECK_THAT(no_model.message, StartsWith(no_model.file + ": set model.preset to one of "));
}

TEST_CASE("extends errors name the file that extends and the line", "[config]") {
  TempFolder folder;
  SECTION("a missing base") {
    const fs::path leaf =
        folder.write("leaf.toml", "# a comment first\nextends = \"missing.toml\"\n");
    const std::string message = config_error([&] { load_experiment(leaf); });
    CHECK_THAT(message, StartsWith(leaf.string() + ":2:11: extends 'missing.toml', but "));
    CHECK_THAT(message, Contains("missing.toml does not exist"));
  }
  SECTION("a cycle") {
    folder.write("a.toml", "extends = \"sub/b.toml\"\n" + kTinyModel);
    folder.write("sub/b.toml", "extends = \"../a.toml\"\n");
    const std::string message = config_error([&] { load_experiment(folder.path() / "a.toml"); });
    CHECK_THAT(message, StartsWith((folder.path() / "sub/b.toml").string() + ":1:11: "));
    CHECK_THAT(message, Contains("extends cycle: "));
    CHECK_THAT(message, Contains("a.toml -> "));
    CHECK_THAT(message, Contains("b.toml -> "));
  }
  SECTION("extends that is not a string") {
    const fs::path leaf = folder.write("leaf.toml", "extends = 3\n");
    CHECK_THAT(config_error([&] { load_experiment(leaf); }),
               StartsWith(leaf.string() + ":1:11: extends must be a string"));
  }
  SECTION("an error in a base file points into the base file") {
    folder.write("base.toml", kTinyModel + "[train]\nmax_steps = 0\n");
    const fs::path leaf = folder.write("leaf.toml", "extends = \"base.toml\"\n");
    CHECK(config_error([&] { load_experiment(leaf); }) ==
          (folder.path() / "base.toml").string() +
              ":4:13: train.max_steps must be >= 1 and <= 1000000000, got 0");
  }
  SECTION("a missing experiment file") {
    const fs::path missing = folder.path() / "nowhere.toml";
    CHECK_THAT(config_error([&] { load_experiment(missing); }),
               StartsWith(missing.string() + ": cannot read"));
  }
}

TEST_CASE("numbers a key cannot hold exactly are refused where they are written, never rounded",
          "[config]") {
  // 2^53 + 1 is the first whole number a double cannot hold; TOML reads it as an integer.
  CHECK_THAT(config_error([] { tiny_with({"train.lr=9007199254740993"}); }),
             StartsWith("--set train.lr: train.lr must be a number a double holds exactly, got "
                        "9007199254740993") &&
                 Contains("write it as a float"));
  CHECK(tiny_with({"train.lr=9007199254740992"}).train.lr == 9007199254740992.0);
  CHECK(config_error([] { tiny_with({"train.lr=inf"}); }) ==
        "--set train.lr: train.lr must be a finite number, got inf");
  const FileError nan = file_error(kTinyModel + "[train]\nlr = nan\n");
  CHECK(nan.message == nan.file + ":4:6: train.lr must be a finite number, got nan");
  SECTION("plugin parameters, which have no schema row") {
    CHECK(config_error([] {
            tiny_with({"policies.bundle=lrmoe", "policies.placement.lrmoe.keep_fraction=nan"});
          }) ==
          "--set policies.placement.lrmoe.keep_fraction: a plugin parameter must be a finite "
          "number, got nan");
    const FileError minus_inf =
        file_error(kTinyModel + "[policies.placement.lrmoe]\nkeep_fraction = -inf\n");
    CHECK(minus_inf.message ==
          minus_inf.file + ":4:17: a plugin parameter must be a finite number, got -inf");
  }
  SECTION("bytes that are not UTF-8 on the command line (found by tests/fuzz)") {
    CHECK(config_error([] {
            tiny_with({"policies.bundle=lrmoe", "policies.placement.keep_frat=ec\xb6n1.5"});
          }) ==
          "--set policies.placement.keep_frat: not valid UTF-8; an experiment's names and "
          "values are UTF-8 text");
    CHECK(tiny_with({"experiment.notes=caf\xc3\xa9 \xe2\x82\xac"}).experiment.notes ==
          "caf\xc3\xa9 \xe2\x82\xac");
  }
  SECTION("a NUL in a string, which would cut a path short") {
    const FileError nul = file_error(kTinyModel + "[store]\npath = \"a\\u0000b.db\"\n");
    CHECK(nul.message == nul.file + ":4:8: store.path must not contain a NUL character");
  }
}

TEST_CASE("input the TOML library could choke on is refused before it parses", "[config]") {
  SECTION("a table header nested deeper than the limit") {
    std::string header = "[a";
    for (int i = 0; i < 50000; ++i) header += ".a";
    const FileError deep = file_error(header + "]\n");
    CHECK_THAT(deep.message,
               StartsWith(deep.file + ":1:") && Contains("nested deeper than 64 levels"));
  }
  SECTION("arrays in arrays") {
    const FileError deep =
        file_error(kTinyModel + "notes = " + std::string(100, '[') + std::string(100, ']'));
    CHECK_THAT(deep.message,
               StartsWith(deep.file + ":3:") && Contains("nested deeper than 64 levels"));
  }
  SECTION("a dotted key in an --set value") {
    std::string value = "{a";
    for (int i = 0; i < 100; ++i) value += ".a";
    CHECK_THAT(config_error([&] { tiny_with({"experiment.notes=" + value + " = 1}"}); }),
               StartsWith("--set experiment.notes:1:") && Contains("nested deeper"));
  }
  SECTION("dots in strings, comments and floats do not count") {
    std::string many = "\"" + std::string(200, '.') + "\"";
    CHECK(tiny_with({"experiment.notes=" + many}).experiment.notes == std::string(200, '.'));
    TempFolder folder;
    std::string text = kTinyModel + "# " + std::string(100, '.') + "\n[train]\nlr = 0.001\n";
    CHECK(load_experiment(folder.write("ok.toml", text)).train.lr == 0.001);
  }
  SECTION("a file larger than the limit") {
    const FileError big = file_error(kTinyModel + "# " + std::string(5 << 20, 'x') + "\n");
    CHECK_THAT(big.message, StartsWith(big.file + ": ") && Contains("larger than the 4 MiB"));
  }
}

TEST_CASE("a path that is not a regular file is refused without opening it", "[config]") {
  TempFolder folder;
  const fs::path fifo = folder.path() / "pipe.toml";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  // Opening a FIFO for reading would wait for a writer: the test would hang, not fail.
  CHECK_THAT(config_error([&] { load_experiment(fifo); }),
             Contains("cannot read " + fifo.string() + " (a FIFO (named pipe))"));
  const fs::path leaf = folder.write("leaf.toml", "extends = \"pipe.toml\"\n");
  CHECK_THAT(config_error([&] { load_experiment(leaf); }),
             StartsWith(leaf.string() + ":1:11: cannot read") && Contains("a FIFO"));
  CHECK_THAT(config_error([&] { load_experiment(folder.path()); }), Contains("(a folder)"));
}

TEST_CASE("command-line override (--set) errors name the override", "[config]") {
  CHECK_THAT(config_error([] { tiny_with({"model.router"}); }),
             StartsWith("--set model.router: no value; use --set section.key=value"));
  CHECK_THAT(config_error([] { tiny_with({"lr=1e-3"}); }),
             StartsWith("--set lr: no section; use --set section.key=value"));
  CHECK(config_error([] { tiny_with({"model.hiden_size=3"}); }) ==
        "--set model.hiden_size: unknown key 'hiden_size' in [model]; did you mean "
        "'hidden_size'?");
  CHECK(config_error([] { tiny_with({"modle.hidden_size=3"}); }) ==
        "--set modle.hidden_size: unknown section 'modle'; did you mean 'model'?");
  CHECK(config_error([] { tiny_with({"train.lr=-1"}); }) ==
        "--set train.lr: train.lr must be > 0 and <= 1e+38, got -1");
  CHECK_THAT(config_error([] { tiny_with({"model.num_layers=many"}); }),
             Contains("model.num_layers must be an integer, got string"));
  CHECK_THAT(config_error([] { tiny_with({"policies.placement=greedy"}); }),
             StartsWith("--set policies.placement: unknown key 'placement' in [policies]"));
  CHECK_THAT(config_error([] { tiny_with({"policies.bundle=symmi"}); }),
             Contains("did you mean 'symi'"));
}

TEST_CASE("fields that contradict each other are reported where the last was set", "[config]") {
  struct Case {
    std::vector<std::string> overrides;
    std::string place;
    std::string problem;
  };
  const std::vector<Case> cases = {
      {{"model.num_heads=5"},
       "--set model.num_heads",
       "model.num_heads (5) must be divisible by model.num_kv_heads (2)"},
      {{"model.top_k=9"}, "--set model.top_k", "model.top_k (9) must be <= model.num_experts (8)"},
      {{"model.first_k_dense=3"},
       "--set model.first_k_dense",
       "model.first_k_dense (3) must be <= model.num_layers (2)"},
      {{"model.num_experts=0", "model.top_k=0"},
       "--set model.num_experts",
       "model.num_experts must be > 0 when MoE layers exist"},
      {{"model.first_k_dense=1", "model.dense_ffn_size=0"},
       "--set model.dense_ffn_size",
       "model.dense_ffn_size must be > 0"},
      {{"model.partial_rotary=0.3"},
       "--set model.partial_rotary",
       "model.head_dim * model.partial_rotary (16 * 0.3 = 4.8) must be an even whole number"},
      {{"model.partial_rotary=0.0625"}, "--set model.partial_rotary", "(16 * 0.0625 = 1)"},
      {{"train.min_lr=0.01"}, "--set train.min_lr", "train.min_lr (0.01) must be <= train.lr"},
      {{"data.kind=text"}, "--set data.kind", "data.kind \"text\" needs data.path"},
      {{"data.kind=tokens", "data.path=x.bin"},
       "--set data.kind",
       "data.kind \"tokens\" needs data.vocab_size"},
      {{"data.kind=tokens", "data.path=x.bin", "data.vocab_size=70000"},
       "--set data.vocab_size",
       "does not fit data.token_dtype \"uint16\""},
      {{"data.topic_vocab=600"},
       "--set data.topic_vocab",
       "data.topic_vocab (600) must be <= data.vocab_size (512)"},
      {{"data.branching=65"},
       "--set data.branching",
       "data.branching (65) must be <= data.topic_vocab (64)"},
      {{"model.vocab_size=300"},
       "--set model.vocab_size",
       "model.vocab_size (300) must be 0 or >= the synthetic data's vocabulary (512)"},
      {{"model.vocab_size=200", "data.kind=text", "data.path=corpus"},
       "--set data.kind",
       "model.vocab_size (200) must be 0 or >= the text data's vocabulary (256)"},
      {{"cluster.ranks=3"},
       "--set cluster.ranks",
       "cluster.ranks (3) must divide model.num_experts (8)"},
  };
  SECTION("on the command line, at the override") {
    for (const Case& c : cases) {
      INFO(c.overrides.front());
      const std::string message = config_error([&] { tiny_with(c.overrides); });
      CHECK_THAT(message, StartsWith(c.place + ": "));
      CHECK_THAT(message, Contains(c.problem));
    }
  }

  SECTION("in a file, at the line of the conflicting value") {
    const FileError error = file_error(kTinyModel + "top_k = 12\n");
    CHECK(error.message == error.file + ":3:9: model.top_k (12) must be <= model.num_experts (8)");
  }
  SECTION("valid combinations pass") {
    CHECK_NOTHROW(tiny_with({"model.first_k_dense=2", "model.num_experts=0", "model.top_k=0"}));
    CHECK_NOTHROW(tiny_with({"data.kind=tokens", "data.path=x.bin", "data.vocab_size=70000",
                             "data.token_dtype=uint32"}));
    CHECK_NOTHROW(tiny_with({"cluster.ranks=4", "model.partial_rotary=0.5"}));
  }
}

TEST_CASE("a warm-up longer than the run is shortened to the run instead of refused", "[config]") {
  const Experiment short_run = tiny_with({"train.max_steps=5"});
  CHECK(short_run.train.max_steps == 5);
  CHECK(short_run.train.warmup_steps == 5);
  // One that fits is kept.
  CHECK(tiny_with({"train.max_steps=50", "train.warmup_steps=7"}).train.warmup_steps == 7);
}
