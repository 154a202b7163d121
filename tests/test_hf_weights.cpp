// Hugging Face weights in and out (Note [Hugging Face models]): safetensors files to their
// specification, hostile ones refused, a model exported in shards and read back whole or by one
// process's experts, transformers 5's stacked layout, and `lrmoe export-hf` of a run whose
// experts were sharded over two processes.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "core/config/hf_model_config.hpp"
#include "core/config/model_presets.hpp"
#include "core/hf/hf_error.hpp"
#include "core/hf/hf_export.hpp"
#include "core/hf/hf_folder.hpp"
#include "core/hf/hf_import.hpp"
#include "core/hf/hf_names.hpp"
#include "core/hf/safetensors_file.hpp"
#include "core/model/transformer.hpp"
#include "core/train/checkpoint.hpp"
#include "core/train/checkpoint_archive.hpp"
#include "support/child_process.hpp"
#include "support/temp_folder.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using lrmoe::HfError;
using lrmoe::ModelConfig;
using lrmoe_test::TempFolder;
using nlohmann::json;

namespace {

ModelConfig model_of(const std::string& preset) {
  ModelConfig m = *lrmoe::find_preset(preset);
  m.vocab_size = 96;
  if (preset == "glm45-mini") m.num_experts = 8;  // small enough for a test
  return m;
}

lrmoe::NamedTensorList named_tensors(lrmoe::Transformer& model) {
  lrmoe::NamedTensorList named;
  for (const auto& item : model->named_parameters()) named.emplace_back(item.key(), item.value());
  for (const auto& item : model->named_buffers()) named.emplace_back(item.key(), item.value());
  return named;
}

// Exports `model` into `folder` as a run with `processes` expert shards would: the dense state,
// then each shard's experts, each in its own file.
void export_in_shards(lrmoe::Transformer& model, const ModelConfig& config, int64_t processes,
                      const fs::path& folder) {
  const lrmoe::HfFamily family = *lrmoe::hf_family(config, nullptr);
  lrmoe::HfExportSource dense;
  std::map<std::string, std::string> weight_map;
  for (auto& [name, tensor] : named_tensors(model))
    if (name.find(".moe.experts_") == std::string::npos) dense.tensors.emplace_back(name, tensor);
  uint64_t total = lrmoe::write_hf_shard(folder, lrmoe::hf_shard_name(1, processes + 1), config,
                                         family, dense, torch::kFloat32, weight_map)
                       .bytes;
  const int64_t per = config.num_experts / processes;
  for (int64_t p = 0; p < processes; ++p) {
    lrmoe::HfExportSource experts{{}, p * per};
    for (auto& [name, tensor] : named_tensors(model)) {
      if (name.find(".moe.experts_") != std::string::npos)
        experts.tensors.emplace_back(name, tensor.narrow(0, p * per, per));
    }
    total += lrmoe::write_hf_shard(folder, lrmoe::hf_shard_name(p + 2, processes + 1), config,
                                   family, experts, torch::kFloat32, weight_map)
                 .bytes;
  }
  lrmoe::write_hf_folder_files(folder, config, family, torch::kFloat32, weight_map, total);
}

std::string hf_error(const std::function<void()>& body) {
  try {
    body();
  } catch (const HfError& e) {
    return e.what();
  }
  return "<no HfError>";
}

// A safetensors file of `header` (JSON) and `data` bytes, as hostile input writes it.
fs::path raw_safetensors(const TempFolder& folder, const json& header, std::size_t data) {
  const std::string text = header.dump();
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(text.size() >> (8 * i));
  return folder.write("raw.safetensors", bytes + text + std::string(data, '\0'));
}

}  // namespace

TEST_CASE("safetensors files keep every dtype, shape and value, and a block reads only its rows",
          "[hf]") {
  TempFolder folder;
  torch::manual_seed(1);
  const lrmoe::NamedTensorList tensors = {{"f32", torch::randn({3, 5})},
                                          {"bf16", torch::randn({4, 2}).to(torch::kBFloat16)},
                                          {"i64", torch::arange(7, torch::kInt64)},
                                          {"scalar", torch::tensor(2.5)},
                                          {"empty", torch::zeros({0, 3})},
                                          {"stacked", torch::randn({4, 6, 3})}};
  const lrmoe::SafetensorsWritten written =
      lrmoe::write_safetensors(folder.path() / "t.safetensors", tensors, {{"format", "pt"}});
  CHECK(written.bytes == fs::file_size(folder.path() / "t.safetensors"));
  CHECK(written.sha256.size() == 64);
  const lrmoe::SafetensorsFile file(folder.path() / "t.safetensors");
  CHECK(file.header().metadata.at("format") == "pt");
  CHECK(file.header().data_offset % 8 == 0);  // the data starts aligned
  for (const auto& [name, tensor] : tensors) {
    const torch::Tensor back = file.read(name);
    CHECK(back.scalar_type() == tensor.scalar_type());
    CHECK(back.sizes() == tensor.sizes());
    CHECK(torch::equal(back, tensor));
  }
  const torch::Tensor& stacked = tensors.back().second;
  CHECK(torch::equal(file.read("stacked", {2, 1, 3}), stacked[2].narrow(0, 1, 3)));
  CHECK(torch::equal(file.read("stacked", {3}), stacked[3]));
  CHECK(torch::equal(file.read("stacked", {-1, 1, 2}), stacked.narrow(0, 1, 2)));
  CHECK_THAT(hf_error([&] { (void)file.read("stacked", {4}); }), Contains("has no block [4, 5)"));
  CHECK_THAT(hf_error([&] { (void)file.read("none"); }), Contains("has no tensor 'none'"));
}

TEST_CASE("hostile safetensors files are refused with the file and what is wrong", "[hf]") {
  TempFolder folder;
  const json f32 = {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}};
  struct Case {
    const char* name;
    json header;
    std::size_t data;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"past the end", {{"a", f32}}, 4, "take 8 bytes of the 4 after the header"},
      {"a hole", {{"a", f32}}, 12, "take 8 bytes of the 12"},
      {"overlap",
       {{"a", f32}, {"b", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {4, 8}}}}},
       8,
       "overlap or leave a hole"},
      {"offsets against the shape",
       {{"a", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 8}}}}},
       8,
       "its shape and dtype take 12 bytes"},
      {"unknown dtype",
       {{"a", {{"dtype", "F128"}, {"shape", {1}}, {"data_offsets", {0, 16}}}}},
       16,
       "unknown dtype 'F128'"},
      {"a shape whose size overflows",
       {{"a",
         {{"dtype", "F32"},
          {"shape", {uint64_t{1} << 40, uint64_t{1} << 40}},
          {"data_offsets", {0, 8}}}}},
       8,
       "a shape too large"},
      {"a dimension past int64",
       {{"a", {{"dtype", "F32"}, {"shape", {0, UINT64_MAX}}, {"data_offsets", {0, 0}}}}},
       0,
       "a shape too large"},
      {"negative dimension",
       {{"a", {{"dtype", "F32"}, {"shape", {-1}}, {"data_offsets", {0, 0}}}}},
       0,
       "a bad shape"},
      {"metadata that is not strings", {{"__metadata__", {{"k", 1}}}}, 0, "must be strings"},
      {"a header that is not an object", json::array({1}), 0, "not a JSON object"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const fs::path file = raw_safetensors(folder, c.header, c.data);
      const std::string message = hf_error([&] { lrmoe::SafetensorsFile read(file); });
      CHECK_THAT(message, StartsWith(file.string() + ": not a valid safetensors file: "));
      CHECK_THAT(message, Contains(c.says));
    }
  }
  SECTION("a header size beyond the file") {
    std::string bytes(8, '\0');
    bytes[0] = 100;
    const fs::path file = folder.write("short.safetensors", bytes + "{}");
    CHECK_THAT(hf_error([&] { lrmoe::SafetensorsFile read(file); }),
               Contains("a header of 100 bytes in a file of 10"));
  }
  SECTION("a folder, and a file too short for the header size") {
    CHECK_THAT(hf_error([&] { lrmoe::SafetensorsFile read(folder.path()); }),
               Contains("not a regular file"));
    const fs::path file = folder.write("tiny.safetensors", "abc");
    CHECK_THAT(hf_error([&] { lrmoe::SafetensorsFile read(file); }),
               Contains("shorter than the 8-byte header size"));
  }
}

TEST_CASE("a model exported in expert shards reads back whole, or by one process's experts",
          "[hf]") {
  for (const std::string preset : {"tiny-moe", "glm45-mini"}) {
    DYNAMIC_SECTION(preset) {
      const ModelConfig config = model_of(preset);
      torch::manual_seed(3);
      lrmoe::Transformer source(config);
      // GLM's selection bias far from its initial zeros, so that a mapping that drops it
      // shows (Qwen3-MoE has none: its bias stays zero).
      for (auto& [name, tensor] : named_tensors(source)) {
        if (config.router == lrmoe::RouterKind::Sigmoid &&
            name.find("selection_bias") != std::string::npos)
          tensor.normal_();
      }
      TempFolder folder;
      export_in_shards(source, config, 2, folder.path());
      const json index = json::parse(std::ifstream(folder.path() / "model.safetensors.index.json"));
      CHECK(index["weight_map"].size() ==
            lrmoe::hf_pieces(config, *lrmoe::hf_family(config, nullptr)).size());

      torch::manual_seed(99);
      lrmoe::Transformer whole(config);
      const lrmoe::HfImport import = lrmoe::load_hf_weights(whole, config, folder.path());
      CHECK(import.unused.empty());
      const auto expected = named_tensors(source);
      const auto got = named_tensors(whole);
      REQUIRE(expected.size() == got.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        INFO(got[i].first);
        CHECK(torch::equal(got[i].second, expected[i].second));
      }

      // The second process's half of the experts, read alone.
      const lrmoe::ExpertShard second{config.num_experts / 2, config.num_experts / 2};
      lrmoe::Transformer half(config, second);
      const lrmoe::HfImport part = lrmoe::load_hf_weights(half, config, folder.path());
      CHECK(part.bytes < import.bytes);
      CHECK(part.unused.empty());  // the other process's experts have their place there
      for (std::size_t l = 0; l < half->moe_layers().size(); ++l) {
        const auto ours = half->moe_layers()[l]->expert_parameters();
        const auto theirs = source->moe_layers()[l]->expert_parameters();
        for (std::size_t k = 0; k < ours.size(); ++k)
          CHECK(torch::equal(ours[k], theirs[k].narrow(0, second.first, second.count)));
      }
    }
  }
}

TEST_CASE("transformers 5's stacked expert layout loads the same weights as the Hub layout",
          "[hf]") {
  const ModelConfig config = model_of("tiny-moe");
  torch::manual_seed(4);
  lrmoe::Transformer source(config);
  TempFolder folder;
  export_in_shards(source, config, 1, folder.path() / "hub");
  // Rewrite the experts as transformers 5 keeps them: one [experts, ...] tensor per projection.
  fs::create_directories(folder.path() / "stacked");
  fs::copy(folder.path() / "hub" / "config.json", folder.path() / "stacked" / "config.json");
  lrmoe::NamedTensorList tensors;
  const lrmoe::HfFolder hub(folder.path() / "hub");
  for (const std::string& name : hub.tensor_names()) {
    if (name.find(".mlp.experts.") != std::string::npos) continue;
    tensors.emplace_back(name, hub.file_of(name)->read(name));
  }
  for (std::size_t l = 0; l < source->moe_layers().size(); ++l) {
    const int64_t layer = source->moe_layer_indices()[l];
    const auto experts = source->moe_layers()[l]->expert_parameters();
    tensors.emplace_back(lrmoe::hf_fused_experts_name(layer, true), experts[0].detach());
    tensors.emplace_back(lrmoe::hf_fused_experts_name(layer, false), experts[1].detach());
  }
  lrmoe::write_safetensors(folder.path() / "stacked" / "model.safetensors", tensors, {});

  lrmoe::Transformer from_hub(config), from_stacked(config);
  lrmoe::load_hf_weights(from_hub, config, folder.path() / "hub");
  lrmoe::load_hf_weights(from_stacked, config, folder.path() / "stacked");
  const auto a = named_tensors(from_hub), b = named_tensors(from_stacked);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(torch::equal(a[i].second, b[i].second));
}

TEST_CASE("weights of another model are refused naming the field or the tensor", "[hf]") {
  const ModelConfig config = model_of("tiny-moe");
  lrmoe::Transformer source(config);
  TempFolder folder;
  export_in_shards(source, config, 1, folder.path());
  ModelConfig wider = config;
  wider.hidden_size = 128;
  lrmoe::Transformer other(wider);
  CHECK_THAT(hf_error([&] { lrmoe::load_hf_weights(other, wider, folder.path()); }),
             Contains("its config.json gives hidden_size = 64, this experiment's "
                      "model.hidden_size is 128"));
  CHECK_THAT(hf_error([&] { lrmoe::check_hf_weights(wider, folder.path()); }),
             Contains("hidden_size = 64"));

  // An index that names a tensor its shard does not hold, and one leaving the folder.
  json index = json::parse(std::ifstream(folder.path() / "model.safetensors.index.json"));
  index["weight_map"]["model.norm.weight"] = lrmoe::hf_shard_name(2, 2);
  folder.write("model.safetensors.index.json", index.dump());
  CHECK_THAT(hf_error([&] { lrmoe::HfFolder read(folder.path()); }),
             Contains("puts tensor 'model.norm.weight' in model-00002-of-00002.safetensors, "
                      "which does not hold it"));
  index["weight_map"]["model.norm.weight"] = "../elsewhere.safetensors";
  folder.write("model.safetensors.index.json", index.dump());
  CHECK_THAT(hf_error([&] { lrmoe::HfFolder read(folder.path()); }),
             Contains("not a file name in the folder"));
  index["weight_map"].erase("model.norm.weight");
  folder.write("model.safetensors.index.json", index.dump());
  CHECK_THAT(hf_error([&] { lrmoe::check_hf_weights(config, folder.path()); }),
             Contains("has no tensor 'model.norm.weight'"));
}

TEST_CASE("weights that are not finite are refused at load naming the file and the tensor",
          "[hf]") {
  const ModelConfig config = model_of("tiny-moe");
  lrmoe::Transformer source(config);
  {
    torch::NoGradGuard no_grad;
    source->named_parameters()["final_norm.weight"].fill_(std::numeric_limits<float>::quiet_NaN());
  }
  TempFolder folder;
  export_in_shards(source, config, 1, folder.path());
  lrmoe::Transformer target(config);
  CHECK_THAT(hf_error([&] { lrmoe::load_hf_weights(target, config, folder.path()); }),
             Contains("tensor 'model.norm.weight' holds NaN or infinite values; model.init_from "
                      "needs finite weights"));
}

TEST_CASE("export-hf writes each process's experts of a sharded run as its own shard", "[hf]") {
  TempFolder folder;
  const std::string db = folder.file("runs.db");
  const fs::path experiment = folder.write(
      "e.toml",
      "extends = \"" + std::string(LRMOE_SOURCE_DIR) +
          "/experiments/tiny-moe.toml\"\n[train]\nmax_steps = 2\nwarmup_steps = 1\n"
          "keep_final_checkpoint = true\n[cluster]\nranks = 2\nexpert_state = \"sharded\"\n");
  const auto trained = lrmoe_test::run_lrmoe({"launch", "-n", "2", experiment.string(), "--db", db},
                                             folder.file("launch.log"));
  INFO(trained.second);
  REQUIRE(trained.first == 0);
  CHECK_THAT(trained.second, Contains("export with         lrmoe export-hf 1 FOLDER"));
  const fs::path out = folder.path() / "hf";
  const auto exported = lrmoe_test::run_lrmoe({"export-hf", "1", out.string(), "--db", db},
                                              folder.file("export.log"));
  INFO(exported.second);
  REQUIRE(exported.first == 0);
  CHECK_THAT(exported.second, Contains("Qwen3MoeForCausalLM (float32)"));
  // The dense state, then one shard per process, each holding its own half of the experts.
  for (int64_t i = 1; i <= 3; ++i) CHECK(fs::exists(out / lrmoe::hf_shard_name(i, 3)));
  const lrmoe::HfFolder hf(out);
  CHECK(hf.file_of("model.layers.0.mlp.experts.0.up_proj.weight")->path().filename() ==
        lrmoe::hf_shard_name(2, 3));
  CHECK(hf.file_of("model.layers.0.mlp.experts.7.up_proj.weight")->path().filename() ==
        lrmoe::hf_shard_name(3, 3));
  CHECK(hf.config().model.num_experts == 8);
  // Each shard holds the weights its process trained: process 1's part of the checkpoint holds
  // experts 4 to 7.
  torch::serialize::InputArchive part;
  const fs::path part_file =
      lrmoe::checkpoint_part_path(fs::path(db + "-checkpoints") / "run-1", 2, 1);
  lrmoe::load_verified(part, part_file, torch::kCPU);
  for (const auto& [name, tensor] : lrmoe::read_named_tensors(part, "experts")) {
    if (name != "block1.moe.experts_gate_up") continue;
    REQUIRE(tensor.size(0) == 4);
    for (int64_t i = 0; i < 4; ++i) {
      const std::string up =
          "model.layers.1.mlp.experts." + std::to_string(4 + i) + ".up_proj.weight";
      CHECK(torch::equal(hf.file_of(up)->read(up), tensor[i].narrow(0, 32, 32)));
    }
  }

  // A folder that is not empty is refused, and the run starts again from the export.
  const auto again =
      lrmoe_test::run_lrmoe({"export-hf", "1", out.string(), "--db", db}, folder.file("again.log"));
  CHECK(again.first == 1);
  CHECK_THAT(again.second, Contains("exists and is not an empty folder"));
  const auto resumed = lrmoe_test::run_lrmoe(
      {"run", experiment.string(), "--db", db, "--set", "model.init_from=" + out.string(), "--set",
       "train.keep_final_checkpoint=false"},
      folder.file("init.log"));
  INFO(resumed.second);
  CHECK(resumed.first == 0);
  CHECK_THAT(resumed.second, Contains("model.init_from " + out.string() + ": 69 tensors"));
}

TEST_CASE("a safetensors file over 4 GiB reads back the tensor past the 4 GiB mark", "[hf][slow]") {
  TempFolder folder;
  const int64_t padding = (int64_t{4} << 30) / 4 + 1024;  // float32s: past 4 GiB
  const torch::Tensor last = torch::arange(1000, torch::kFloat32);
  const lrmoe::SafetensorsWritten written = lrmoe::write_safetensors(
      folder.path() / "big.safetensors",
      {{"padding", torch::zeros({padding}, torch::kFloat32)}, {"last", last}}, {});
  CHECK(written.bytes > (uint64_t{4} << 30));
  const lrmoe::SafetensorsFile file(folder.path() / "big.safetensors");
  CHECK(file.header().tensors.at("last").begin > (uint64_t{4} << 30));
  CHECK(torch::equal(file.read("last"), last));
  CHECK(torch::equal(file.read("padding", {-1, padding - 3, 3}), torch::zeros({3})));
}

TEST_CASE("export-hf of a run with replicated experts writes the dense state and the experts apart",
          "[hf]") {
  TempFolder folder;
  const std::string db = folder.file("runs.db");
  const auto trained = lrmoe_test::run_lrmoe(
      {"run", std::string(LRMOE_SOURCE_DIR) + "/experiments/tiny-moe.toml", "--db", db, "--set",
       "train.max_steps=1", "--set", "train.warmup_steps=1", "--set",
       "train.keep_final_checkpoint=true", "--set", "cluster.expert_state=replicated"},
      folder.file("run.log"));
  INFO(trained.second);
  REQUIRE(trained.first == 0);
  const fs::path out = folder.path() / "hf";
  const auto exported = lrmoe_test::run_lrmoe(
      {"export-hf", "1", out.string(), "--db", db, "--dtype", "bfloat16"}, folder.file("e.log"));
  INFO(exported.second);
  REQUIRE(exported.first == 0);
  const lrmoe::HfFolder hf(out);
  const lrmoe::SafetensorsFile dense(out / lrmoe::hf_shard_name(1, 2));
  for (const auto& [name, entry] : dense.header().tensors) {
    INFO(name);
    CHECK(name.find(".mlp.experts.") == std::string::npos);
    // The router stays float32, as transformers keeps it.
    CHECK(entry.dtype == (name.find(".mlp.gate.") != std::string::npos ? "F32" : "BF16"));
  }
  CHECK(hf.file_of("model.layers.1.mlp.experts.7.down_proj.weight")->path().filename() ==
        lrmoe::hf_shard_name(2, 2));
  CHECK(hf.tensor_names().size() == dense.header().tensors.size() + 2 * 8 * 3);
}

TEST_CASE("export-hf writes FOLDER/ as FOLDER, and never deletes or shares a staging folder",
          "[hf]") {
  TempFolder folder;
  const std::string db = folder.file("runs.db");
  const auto trained =
      lrmoe_test::run_lrmoe({"run", std::string(LRMOE_SOURCE_DIR) + "/experiments/tiny-moe.toml",
                             "--db", db, "--set", "train.max_steps=1", "--set",
                             "train.warmup_steps=1", "--set", "train.keep_final_checkpoint=true"},
                            folder.file("run.log"));
  INFO(trained.second);
  REQUIRE(trained.first == 0);
  const auto export_to = [&](const std::string& out) {
    return lrmoe_test::run_lrmoe({"export-hf", "1", out, "--db", db}, folder.file("e.log"));
  };

  // The README's form, with a trailing slash.
  const fs::path out = folder.path() / "trained";
  const auto slashed = export_to(out.string() + "/");
  INFO(slashed.second);
  REQUIRE(slashed.first == 0);
  CHECK(lrmoe::HfFolder(out).tensor_names().size() > 0);
  CHECK_FALSE(fs::exists(folder.path() / "trained.partial"));

  // A folder named like the staging one (the user's, or another export's running now) is left
  // as it is, and the export refused.
  const fs::path theirs = folder.path() / "other.partial";
  fs::create_directories(theirs);
  std::ofstream(theirs / "keep.txt") << "mine";
  const auto refused = export_to((folder.path() / "other").string());
  CHECK(refused.first != 0);
  CHECK_THAT(refused.second, Contains("other.partial") && Contains("remove it"));
  CHECK(fs::exists(theirs / "keep.txt"));
  CHECK_FALSE(fs::exists(folder.path() / "other"));

  for (const std::string& none : {std::string("."), std::string("")}) {
    const auto nowhere = export_to(none);
    CHECK(nowhere.first != 0);
    CHECK_THAT(nowhere.second, Contains("names no new folder"));
  }
}

TEST_CASE("a run from a config.json and Hugging Face weights resumes after both are gone", "[hf]") {
  TempFolder folder;
  const std::string db = folder.file("runs.db");
  const std::string tiny = std::string(LRMOE_SOURCE_DIR) + "/experiments/tiny-moe.toml";
  REQUIRE(
      lrmoe_test::run_lrmoe({"run", tiny, "--db", db, "--set", "train.max_steps=1", "--set",
                             "train.warmup_steps=1", "--set", "train.keep_final_checkpoint=true"},
                            folder.file("first.log"))
          .first == 0);
  const fs::path weights = folder.path() / "weights";
  REQUIRE(lrmoe_test::run_lrmoe({"export-hf", "1", weights.string(), "--db", db},
                                folder.file("export.log"))
              .first == 0);
  CHECK_FALSE(fs::exists(weights.string() + ".partial"));
  const fs::path config = folder.path() / "config" / "config.json";
  fs::create_directories(config.parent_path());
  fs::copy_file(weights / "config.json", config);

  const std::vector<std::string> args{LRMOE_BINARY,
                                      "run",
                                      tiny,
                                      "--db",
                                      db,
                                      "--set",
                                      "model.hf_config=" + config.string(),
                                      "--set",
                                      "model.init_from=" + weights.string(),
                                      "--set",
                                      "train.max_steps=400",
                                      "--set",
                                      "train.checkpoint_every=2"};
  {
    lrmoe_test::ChildProcess child(args, folder.file("second.log"));
    const fs::path checkpoint = lrmoe::checkpoint_path(fs::path(db + "-checkpoints") / "run-2", 2);
    // Waits for the checkpoint, up to five minutes: on a loaded machine the run's start alone
    // took over the 30 s this bound once was.
    for (int i = 0; i < 6000 && !fs::exists(checkpoint); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE(fs::exists(checkpoint));
    child.signal(SIGKILL);
    child.wait(std::chrono::seconds(20));
  }
  fs::remove_all(weights);
  fs::remove_all(config.parent_path());
  // Its resolved experiment names every model key, so the config.json is not read again; and
  // its checkpoint holds the weights, so the folder is not either.
  const auto resumed =
      lrmoe_test::run_lrmoe({"resume", "2", "--db", db}, folder.file("resume.log"));
  INFO(resumed.second);
  CHECK(resumed.first == 0);
}
