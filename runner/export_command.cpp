#include "runner/export_command.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>

#include "core/replay/expert_load_csv.hpp"
#include "runner/database_option.hpp"
#include "runner/named_runs.hpp"
#include "runner/query_result_text.hpp"
#include "runner/run_scalars.hpp"
#include "runner/tensorboard_events.hpp"
#include "store/results_store.hpp"

namespace fs = std::filesystem;

namespace lrmoe {
namespace {

// "run-12-quickstart-models_3": the run's id and name, safe as a file name.
std::string run_file_name(const RunSummary& run) {
  std::string name = run.name;
  std::replace_if(
      name.begin(), name.end(),
      [](char c) { return !std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.'; },
      '_');
  return fmt::format("run-{}-{}", run.id, name);
}

fs::path write_tensorboard(const RunScalars& scalars, const fs::path& folder) {
  const fs::path run_folder = folder / run_file_name(scalars.run);
  fs::create_directories(run_folder);
  const double start = scalars.wall_times.empty() ? 0 : scalars.wall_times.front();
  char host[256] = "lrmoe";
  gethostname(host, sizeof host - 1);
  const fs::path file =
      run_folder / fmt::format("events.out.tfevents.{}.{}", static_cast<int64_t>(start), host);
  std::map<int64_t, double> wall_time_of;
  for (std::size_t i = 0; i < scalars.steps.size(); ++i)
    wall_time_of[scalars.steps[i]] = scalars.wall_times[i];
  TensorBoardEventWriter writer(file, start);
  for (const ScalarSeries& series : scalars.series) {
    for (const auto& [step, value] : series.points) {
      const auto wall = wall_time_of.find(step);
      writer.add_scalar(series.tag, step, wall == wall_time_of.end() ? start : wall->second, value);
    }
  }
  writer.close();
  return file;
}

fs::path write_csv(const RunScalars& scalars, const fs::path& folder) {
  fs::create_directories(folder);
  const fs::path file = folder / (run_file_name(scalars.run) + ".csv");
  std::ofstream out(file);
  out << "step";
  for (const ScalarSeries& series : scalars.series) out << "," << csv_field(series.tag);
  out << "\n";
  // One row per recorded step; a figure a step has no value for (evaluation loss between
  // evaluations) is an empty cell.
  std::vector<std::size_t> next(scalars.series.size(), 0);
  for (const int64_t step : scalars.steps) {
    out << step;
    for (std::size_t s = 0; s < scalars.series.size(); ++s) {
      const auto& points = scalars.series[s].points;
      out << ",";
      if (next[s] < points.size() && points[next[s]].first == step)
        out << fmt::format("{}", points[next[s]++].second);
    }
    out << "\n";
  }
  out.close();
  if (!out) throw std::runtime_error("export: cannot write " + file.string());
  return file;
}

// The run's recorded per-expert loads, every recorded step, in the CSV that `lrmoe replay
// --loads-csv` reads (core/replay/expert_load_csv.hpp).
fs::path write_expert_loads(const ResultsStore& store, const RunSummary& run,
                            const fs::path& folder) {
  ExpertLoadHistory history =
      store.expert_load_history(run.id, std::numeric_limits<int64_t>::max());
  const RecordedExpertLoads loads{"", std::move(history.steps), std::move(history.pairs)};
  fs::create_directories(folder);
  const fs::path file = folder / (run_file_name(run) + "-expert-loads.csv");
  std::ofstream out(file);
  write_expert_load_csv(loads, out);
  out.close();
  if (!out) throw std::runtime_error("export: cannot write " + file.string());
  return file;
}

}  // namespace

CLI::App* add_export_command(CLI::App& app, ExportOptions& options) {
  CLI::App* command = app.add_subcommand(
      "export",
      "write runs' per-step figures as TensorBoard event files or CSV, or their routing as "
      "per-expert loads, for the tools that read them");
  add_named_runs_options(command, options.runs, options.sweeps);
  add_database_option(command, options.database, "results database");
  command
      ->add_option("--format", options.format,
                   "tensorboard, csv, or expert-loads (each step's pairs per MoE layer and "
                   "expert, the CSV `lrmoe replay --loads-csv` reads)")
      ->capture_default_str();
  command->add_option("--out", options.out, "the folder to write into")->capture_default_str();
  return command;
}

int export_command(const ExportOptions& options, std::ostream& out) {
  if (options.format != "tensorboard" && options.format != "csv" &&
      options.format != "expert-loads")
    throw std::invalid_argument("export: --format " + options.format +
                                ": use tensorboard, csv or expert-loads");
  const auto store = ResultsStore::open_read_only(options.database);
  const std::vector<int64_t> runs = named_runs(*store, options.runs, options.sweeps, "export");
  const fs::path folder(options.out);
  for (const int64_t run : runs) {
    if (options.format == "expert-loads") {
      const std::optional<RunSummary> summary = store->find_run(run);
      if (!summary)
        throw std::invalid_argument(
            fmt::format("export: {} has no run {}; lrmoe runs --db {} lists them", options.database,
                        run, options.database));
      const fs::path file = write_expert_loads(*store, *summary, folder);
      out << fmt::format("run {}: per-expert loads in {}\n", run, file.string());
      continue;
    }
    const RunScalars scalars = read_run_scalars(*store, run);
    const fs::path file = options.format == "tensorboard" ? write_tensorboard(scalars, folder)
                                                          : write_csv(scalars, folder);
    out << fmt::format("run {}: {} figures over {} steps in {}\n", run, scalars.series.size(),
                       scalars.steps.size(), file.string());
  }
  if (options.format == "tensorboard")
    out << fmt::format("view them: tensorboard --logdir {}\n", folder.string());
  return 0;
}

}  // namespace lrmoe
