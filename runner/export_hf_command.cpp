#include "runner/export_hf_command.hpp"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <vector>

#include "core/config/experiment_loader.hpp"
#include "core/hf/hf_export.hpp"
#include "core/pipeline/expert_fetch_plan.hpp"
#include "core/train/checkpoint_archive.hpp"
#include "runner/database_option.hpp"
#include "runner/run_info.hpp"
#include "store/results_store.hpp"

namespace fs = std::filesystem;

namespace lrmoe {
namespace {

// The checkpoint to convert: step `step`'s, or the newest that verifies.
fs::path checkpoint_to_export(const fs::path& folder, std::optional<int64_t> step, int64_t run) {
  if (step) {
    const fs::path file = checkpoint_path(folder, *step);
    if (!fs::exists(file)) {
      throw std::invalid_argument(
          fmt::format("run {} has no checkpoint of step {} ({}); omit --step for its newest", run,
                      *step, file.string()));
    }
    return file;
  }
  std::vector<std::string> skipped;
  const std::optional<fs::path> latest = latest_verified_checkpoint(folder, skipped);
  if (!latest) {
    throw std::invalid_argument(fmt::format(
        "run {} has no checkpoint that verifies in {}{}; a finished run keeps its last one "
        "with train.keep_final_checkpoint = true (a stopped one, with train.checkpoint_every > 0)",
        run, folder.string(),
        skipped.empty() ? "" : fmt::format(" ({})", fmt::join(skipped, "; "))));
  }
  return *latest;
}

// The named tensors `key` of `file`, read after its checksum verifies.
NamedTensors read_checkpoint_tensors(const fs::path& file, const std::string& key,
                                     int64_t* processes) {
  torch::serialize::InputArchive archive;
  try {
    load_verified(archive, file, torch::kCPU);
    if (processes != nullptr) *processes = read_value(archive, "processes").toInt();
    return read_named_tensors(archive, key);
  } catch (...) {
    rethrow_as_unreadable(file);
  }
}

// The routed experts' stacked tensors ("block1.moe.experts_gate_up"), the rest being dense.
bool is_experts(const std::string& name) {
  return name.find(".moe.experts_") != std::string::npos;
}

}  // namespace

CLI::App* add_export_hf_command(CLI::App& app, ExportHfOptions& options) {
  CLI::App* command = app.add_subcommand(
      "export-hf",
      "write a run's checkpoint as a Hugging Face model folder (config.json, safetensors) that "
      "transformers loads");
  command->add_option("run", options.run, "the run (its id)")->required();
  command->add_option("folder", options.folder, "the folder to write; new or empty")->required();
  command->add_option("--step", options.step,
                      "the checkpoint's step; default: the newest that verifies");
  command->add_option("--dtype", options.dtype, "float32 (the master weights) or bfloat16")
      ->check(CLI::IsMember({"float32", "bfloat16"}))
      ->capture_default_str();
  add_database_option(command, options.database, "results database");
  return command;
}

int export_hf_command(const ExportHfOptions& options, std::ostream& out) {
  const auto started = std::chrono::steady_clock::now();
  // "trained/" names the folder "trained": its staging folder must sit beside it, not in it.
  fs::path folder = fs::path(options.folder).lexically_normal();
  if (!folder.has_filename()) folder = folder.parent_path();
  if (folder.empty() || folder.filename() == "." || folder.filename() == "..") {
    throw std::invalid_argument(
        fmt::format("export-hf: '{}' names no new folder; give the folder to write, e.g. trained",
                    options.folder));
  }
  std::error_code ec;
  if (fs::exists(folder, ec) && !(fs::is_directory(folder, ec) && fs::is_empty(folder, ec))) {
    throw std::invalid_argument(fmt::format(
        "export-hf: {} exists and is not an empty folder; name a new folder", folder.string()));
  }
  std::string resolved_toml, database_path;
  {
    const auto store = ResultsStore::open_read_only(options.database);
    const std::optional<RunSummary> summary = store->find_run(options.run);
    if (!summary) {
      throw std::invalid_argument(fmt::format("{}: has no run {}; lrmoe runs --db {} lists them",
                                              options.database, options.run, options.database));
    }
    resolved_toml = summary->resolved_toml;
    database_path = store->path();
  }
  const Experiment experiment =
      load_experiment_text(resolved_toml, fmt::format("run {}'s experiment", options.run));
  const fs::path checkpoints = checkpoint_folder(database_path, options.run);
  const fs::path main = checkpoint_to_export(checkpoints, options.step, options.run);

  int64_t processes = 1;
  // The main file's tensors: the dense state, and every expert when they are not sharded.
  HfExportSource dense, main_experts;
  for (auto& [name, tensor] : read_checkpoint_tensors(main, "model", &processes))
    (is_experts(name) ? main_experts : dense).tensors.emplace_back(name, tensor);
  // The vocabulary the run trained with (0 in the experiment: the data's) is the embedding's.
  ModelConfig model = experiment.model;
  for (const auto& [name, tensor] : dense.tensors)
    if (name == "embedding.weight") model.vocab_size = tensor.size(0);
  std::string why_not;
  const std::optional<HfFamily> family = hf_family(model, &why_not);
  if (!family) {
    throw std::invalid_argument(fmt::format(
        "export-hf: run {}'s model has no transformers counterpart: {}", options.run, why_not));
  }
  const torch::ScalarType dtype = options.dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat32;

  // Shards: the dense state, then the experts of each process's part (or of the main file when
  // they are not sharded), one source in memory at a time; into a folder beside FOLDER, renamed
  // to it once complete, so that a failed export leaves nothing under its name.
  const int64_t step = std::stoll(main.stem().string().substr(std::string("step-").size()));
  const bool parts = fs::exists(checkpoint_part_path(checkpoints, step, 0), ec);
  const int64_t shards = 1 + (parts ? processes : (main_experts.tensors.empty() ? 0 : 1));
  // The staging folder is made here, and must be new: one of that name may be the user's, an
  // export killed before it could clean up, or another export's into the same folder running
  // now; none of them is this export's to delete or to share.
  const fs::path staging = folder.string() + ".partial";
  if (folder.has_parent_path()) fs::create_directories(folder.parent_path(), ec);
  if (!fs::create_directory(staging, ec)) {
    throw std::invalid_argument(fmt::format(
        "export-hf: cannot make the staging folder {} ({}); if it is left from an export that "
        "was stopped, remove it and export again",
        staging.string(), ec ? ec.message() : "it exists"));
  }
  std::map<std::string, std::string> weight_map;
  std::vector<HfExportedFile> written;
  try {
    written.push_back(write_hf_shard(staging, hf_shard_name(1, shards), model, *family, dense,
                                     dtype, weight_map));
    dense.tensors.clear();
    if (!main_experts.tensors.empty()) {
      written.push_back(write_hf_shard(staging, hf_shard_name(2, shards), model, *family,
                                       main_experts, dtype, weight_map));
      main_experts.tensors.clear();
    }
    for (int64_t p = 0; parts && p < processes; ++p) {
      const ProcessView view{p, processes, experiment.cluster.ranks / processes};
      const ExpertShard shard =
          home_shard(model.num_experts, experiment.cluster.ranks, view, view.index);
      const HfExportSource experts{
          read_checkpoint_tensors(checkpoint_part_path(checkpoints, step, p), "experts", nullptr),
          shard.first};
      written.push_back(write_hf_shard(staging, hf_shard_name(2 + p, shards), model, *family,
                                       experts, dtype, weight_map));
    }
    uint64_t tensor_bytes = 0;
    for (const HfExportedFile& file : written) tensor_bytes += file.tensor_bytes;
    write_hf_folder_files(staging, model, *family, dtype, weight_map, tensor_bytes);
    fs::remove(folder, ec);  // an empty folder named for it
    fs::rename(staging, folder);
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
  uint64_t total = 0;
  for (const HfExportedFile& file : written) total += file.bytes;

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  out << fmt::format(
      "run {}, step {}: {} ({}) in {}: {} tensors, {:.1f} MiB in {} files, {:.2f} s "
      "({:.0f} MiB/s)\n",
      options.run, step, hf_architecture(*family), options.dtype, folder.string(),
      weight_map.size(), static_cast<double>(total) / (1 << 20), written.size(), seconds,
      static_cast<double>(total) / (1 << 20) / std::max(seconds, 1e-9));
  for (const HfExportedFile& file : written) {
    out << fmt::format("  {}: {} tensors, {} bytes, SHA-256 {}\n", file.name, file.tensors,
                       file.bytes, file.sha256);
  }
  return 0;
}

}  // namespace lrmoe
