#include "runner/resume_command.hpp"

#include <fmt/format.h>

#include <fstream>
#include <stdexcept>

#include "core/train/checkpoint.hpp"
#include "runner/launch_command.hpp"
#include "runner/run_command.hpp"
#include "runner/run_info.hpp"
#include "store/results_store.hpp"

namespace lrmoe {

int resume_command(int64_t run, const std::string& database) {
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
    const std::optional<std::filesystem::path> latest = latest_checkpoint(folder);
    if (!latest) {
      throw std::invalid_argument(fmt::format(
          "{}: run {} has no checkpoint in {}; only runs with train.checkpoint_every > 0 can be "
          "resumed",
          database, run, folder.string()));
    }
    point.checkpoint = latest->string();
    processes = summary->processes;
    // The run's own resolved experiment, as a file its processes load.
    experiment_file = folder / "experiment.toml";
    std::ofstream(experiment_file) << summary->resolved_toml;
  }
  ExperimentSource source;
  source.file = experiment_file.string();
  source.database = database;
  source.resume = point;
  return processes > 1 ? launch_command(source, processes) : run_command(source);
}

}  // namespace lrmoe
