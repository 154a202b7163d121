#include "runner/resume_command.hpp"

#include <fmt/format.h>

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/config/experiment_loader.hpp"
#include "core/plugins/policy_set.hpp"
#include "core/system/host_info.hpp"
#include "core/train/checkpoint.hpp"
#include "runner/launch_command.hpp"
#include "runner/run_command.hpp"
#include "runner/run_info.hpp"
#include "store/results_store.hpp"

namespace lrmoe {
namespace {

// Each plugin the run recorded whose library, as found now for the run's experiment, has another
// SHA-256: "placement plugin 'lrmoe' (…/lrmoe.so): recorded abcd…, now 1234…".
std::vector<std::string> changed_plugins(const ResultsStore& store, int64_t run,
                                         const std::filesystem::path& experiment_file) {
  const Experiment experiment = load_experiment(experiment_file, {});
  const PolicySet now = load_policy_set(experiment.policies);
  const QueryResult recorded = store.query(
      fmt::format("SELECT kind, name, sha256 FROM run_plugins WHERE run = {} ORDER BY kind", run));
  std::vector<std::string> changed;
  for (const auto& row : recorded.rows) {
    for (const PluginRecord& plugin : now.records) {
      if (plugin.kind != row[0].value_or("") || plugin.name != row[1].value_or("")) continue;
      if (plugin.sha256 != row[2].value_or(""))
        changed.push_back(fmt::format("{} plugin '{}' ({}): recorded {}, now {}", plugin.kind,
                                      plugin.name, plugin.path, row[2].value_or("-").substr(0, 12),
                                      plugin.sha256.substr(0, 12)));
    }
  }
  return changed;
}

}  // namespace

int resume_command(int64_t run, const std::string& database, const ResumeOptions& options) {
  ResumePoint point{run, {}};
  int64_t processes = 1;
  std::filesystem::path experiment_file;
  {
    // Opening for writing settles runs whose process is gone as interrupted.
    const auto store = ResultsStore::open(database);
    const std::optional<RunSummary> summary = store->find_run(run);
    if (!summary) {
      throw std::invalid_argument(
          fmt::format("{}: has no run {}; lrmoe runs --db {} lists them", database, run, database));
    }
    if (summary->status != "stopped" && summary->status != "interrupted" &&
        summary->status != "failed") {
      throw std::invalid_argument(
          fmt::format("{}: run {} is {}: only a stopped, interrupted or failed run can be resumed",
                      database, run, summary->status));
    }
    if (summary->replay) {
      throw std::invalid_argument(fmt::format(
          "{}: run {} is a replay; replays do not train and are not resumed: replay again",
          database, run));
    }
    const std::filesystem::path folder = checkpoint_folder(store->path(), run);
    if (!latest_checkpoint(folder)) {
      throw std::invalid_argument(fmt::format(
          "{}: run {} has no checkpoint in {}; only runs with train.checkpoint_every > 0 can be "
          "resumed",
          database, run, folder.string()));
    }
    // A damaged checkpoint gives way to the newest earlier one that verifies, saying so.
    std::vector<std::string> skipped;
    const std::optional<std::filesystem::path> latest = latest_verified_checkpoint(folder, skipped);
    if (!latest)
      throw std::invalid_argument(
          fmt::format("run {}: no checkpoint verifies: {}", run, fmt::join(skipped, "; ")));
    for (const std::string& why : skipped) {
      const std::string line =
          fmt::format("skipped: {}; resuming from {}", why, latest->filename().string());
      fmt::print(stderr, "lrmoe: {}\n", line);
      store->add_event(run, "warning", line);
    }
    point.checkpoint = latest->string();
    processes = summary->processes;
    // The run's own resolved experiment, as a file its processes load.
    experiment_file = folder / "experiment.toml";
    std::ofstream(experiment_file) << summary->resolved_toml;
    // A run goes on with the build that trained it, or says it does not.
    point.other_build = summary->code_version != code_version();
    if (point.other_build && !options.allow_changed_code) {
      throw std::invalid_argument(fmt::format(
          "{}: run {} was trained by lrmoe {}, this is {}; resume it with that build, or with "
          "--allow-changed-code (recorded as an event of the run: the resumed steps need not "
          "train as the uninterrupted run would have)",
          database, run, summary->code_version, code_version()));
    }
    // A run goes on with the plugins it began with, or says it does not.
    const std::vector<std::string> changed = changed_plugins(*store, run, experiment_file);
    if (!changed.empty() && !options.allow_changed_plugins) {
      throw std::invalid_argument(fmt::format(
          "{}: run {}'s {} since the run began; rebuild the recorded version, or resume with "
          "--allow-changed-plugins (recorded as an event of the run)",
          database, run, fmt::join(changed, "; ")));
    }
    for (const std::string& plugin : changed)
      store->add_event(run, "warning", "resumed with a changed library: " + plugin);
    if (point.other_build) {
      store->add_event(run, "warning",
                       fmt::format("resumed by lrmoe {}, not the build that trained the run ({})",
                                   code_version(), summary->code_version));
    }
  }
  ExperimentSource source;
  source.file = experiment_file.string();
  source.database = database;
  source.resume = point;
  return processes > 1 ? launch_command(source, processes) : run_command(source);
}

}  // namespace lrmoe
