#include "runner/sweep_command.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/config/experiment_loader.hpp"
#include "core/config/sweep_spec.hpp"
#include "core/device/compute_device.hpp"
#include "core/distributed/launch_environment.hpp"
#include "core/plugins/policy_set.hpp"
#include "core/system/host_info.hpp"
#include "core/train/checkpoint.hpp"
#include "core/train/process_footprint.hpp"
#include "runner/child_status.hpp"
#include "runner/interrupt.hpp"
#include "runner/run_info.hpp"
#include "runner/sweep_progress.hpp"
#include "store/results_store.hpp"

namespace fs = std::filesystem;

namespace lrmoe {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(100);

// A cell to run, resolved.
struct PendingCell {
  const SweepCell* cell;
  int64_t number;                      // in the database
  std::vector<std::string> overrides;  // on top of its resolved experiment: the threads
  std::optional<int64_t> resume;       // the cell's interrupted run, continued from its checkpoint
};

// The cell's experiment as this invocation resolved it, written to `file` and run from there:
// the base file is read once, so an edit while the sweep runs changes no cell. Read back, it
// must resolve to the same experiment.
void write_resolved_cell(const Experiment& experiment, const fs::path& file) {
  {
    std::ofstream out(file);
    out << "# A sweep cell's experiment, resolved when the sweep started: what the cell trains.\n"
        << to_toml(experiment);
    if (!out) throw std::runtime_error("sweep: cannot write " + file.string());
  }
  if (experiment_identity(load_experiment(file, {})) != experiment_identity(experiment))
    throw std::logic_error("sweep: " + file.string() +
                           " does not resolve to the experiment written into it");
}

struct RunningCell {
  PendingCell cell;
  pid_t pid;
  fs::path log;
  std::chrono::steady_clock::time_point started;
};

// The cell's identity in the database: `policies.bundle="lrmoe", experiment.seed=2`.
std::string settings_text(const SweepCell& cell) {
  std::string text;
  for (const SweepSetting& s : cell.settings)
    text += (text.empty() ? "" : ", ") + s.key + "=" + s.toml;
  return text;
}

// `lrmoe run` (or `launch -n P`) of the cell's resolved experiment, tagged.
std::vector<std::string> cell_command(const std::string& program, const SweepSpec& spec,
                                      const fs::path& experiment, const std::string& database,
                                      const SweepCellTag& tag,
                                      const std::vector<std::string>& overrides) {
  std::vector<std::string> arguments{program};
  if (spec.processes > 1) {
    arguments.insert(arguments.end(), {"launch", "-n", std::to_string(spec.processes)});
  } else {
    arguments.push_back("run");
  }
  arguments.push_back(experiment.string());
  for (const std::string& o : overrides) arguments.insert(arguments.end(), {"--set", o});
  arguments.insert(arguments.end(),
                   {"--db", database, "--sweep-cell", fmt::format("{}:{}", tag.sweep, tag.cell)});
  return arguments;
}

// The run a cell continues instead of starting again: its last run, when it was stopped or
// interrupted and left a checkpoint this program can read (same code version; the experiment is
// the cell's, as the sweep's record checks). A failed run starts again: its failure may repeat.
std::optional<int64_t> resumable_run(const ResultsStore& store, const SweepCellState& state) {
  if (!state.run || (state.status != "stopped" && state.status != "interrupted"))
    return std::nullopt;
  const std::optional<RunSummary> summary = store.find_run(*state.run);
  if (!summary || summary->code_version != code_version()) return std::nullopt;
  std::vector<std::string> damaged;  // lrmoe resume says why, when it skips them
  if (!latest_verified_checkpoint(checkpoint_folder(store.path(), *state.run), damaged))
    return std::nullopt;
  return state.run;
}

// Starts `arguments` with stdout and stderr appended to `log` (a continued or repeated cell keeps
// what its earlier runs wrote) and no stdin.
pid_t start_cell(const std::vector<std::string>& arguments, const fs::path& log) {
  std::vector<char*> argv;
  for (const std::string& a : arguments) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, argv.front(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0)
    throw std::runtime_error(
        fmt::format("cannot start {}: {}", arguments.front(), std::strerror(error)));
  return pid;
}

// The last non-empty line of a cell's log: what went wrong, usually.
std::string last_line(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

}  // namespace

int sweep_command(const SweepOptions& options) {
  const SweepSpec spec = load_sweep_spec(options.file);

  // Every cell's experiment is loaded before anything runs: a mistake in any cell is found now.
  std::vector<Experiment> experiments;
  SweepRecord record{spec.name, spec.file, {}};
  // Cells mostly share their plugin folders: each set of folders is searched once.
  std::map<std::vector<fs::path>, PluginCatalog> catalogs;
  for (const SweepCell& cell : spec.cells) {
    try {
      experiments.push_back(load_experiment(spec.experiment, spec.overrides(cell)));
      // The plugins too: a table of parameters for a plugin no cell chooses is checked now
      // (Note [Plugin parameters]), not when the cell that would choose it runs.
      const PoliciesConfig& policies = experiments.back().policies;
      const std::vector<fs::path> folders = plugin_folders(policies);
      auto catalog = catalogs.find(folders);
      if (catalog == catalogs.end())
        catalog = catalogs.emplace(folders, PluginCatalog::discover(folders)).first;
      create_policy_set(policies, catalog->second);
      LaunchEnvironment launch;
      launch.world_size = spec.processes;
      check_processes_fit(experiments.back(), launch);
      // The processes of `jobs` cells at once, on this host's memory.
      const Experiment& e = experiments.back();
      check_footprint_fits(process_footprint(e.model, e.train, e.cluster, spec.processes),
                           resolve_device(e.train.device, /*local_rank=*/0),
                           spec.processes * options.jobs);
    } catch (const std::exception& error) {
      throw ConfigError(fmt::format("{}: cell {} ({}): {}", spec.place_of(cell, error.what()),
                                    cell.index, cell.label(), error.what()));
    }
    SweepCellRecord row{
        settings_text(cell), cell.label(), experiment_identity(experiments.back()), {},
        cell.model,          cell.variant};
    for (const SweepSetting& s : cell.settings) row.values.emplace_back(s.key, s.text);
    record.cells.push_back(std::move(row));
  }
  const std::string database = options.database.value_or(experiments.front().store.path);
  auto store = ResultsStore::open(database);
  const SweepCellNumbers numbers = store->record_sweep(record);

  // Which cells to run: those whose last run did not finish.
  std::vector<SweepCellState> states = store->sweep_cells(numbers.sweep);
  auto state_of = [&](int64_t number) -> const SweepCellState& {
    return *std::find_if(states.begin(), states.end(),
                         [&](const SweepCellState& s) { return s.cell == number; });
  };
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t threads = std::max<int64_t>(1, cores / (options.jobs * spec.processes));
  std::vector<PendingCell> pending;
  int64_t resumed = 0;
  SweepTally tally;
  tally.cells = static_cast<int64_t>(spec.cells.size());
  std::vector<std::string> retrained;
  for (std::size_t i = 0; i < spec.cells.size(); ++i) {
    SweepCellState state = state_of(numbers.cells[i]);
    // A run that trained something other than the cell (its base file was edited while an older
    // build's sweep ran) is not the cell's: the cell runs again.
    if (!state.run_matches) {
      retrained.push_back(fmt::format("cell {} (run {})", state.cell, *state.run));
      state.status.clear();
    }
    if (state.status == "finished") {
      ++tally.finished;
      continue;
    }
    if (state.status == "running") {
      ++tally.elsewhere;  // another process is running it now
      continue;
    }
    if (state.status == "failed" && !options.retry_failed) {
      ++tally.failed;
      continue;
    }
    PendingCell cell{&spec.cells[i], numbers.cells[i], {}, resumable_run(*store, state)};
    if (cell.resume) ++resumed;
    // Each cell gets its share of the cores, unless the sweep sets the threads itself.
    if (experiments[i].train.threads == 0)
      cell.overrides.push_back(fmt::format("train.threads={}", threads));
    pending.push_back(std::move(cell));
  }

  const fs::path logs = fs::absolute(database).parent_path() /
                        (fs::path(database).stem().string() + "-sweeps") / spec.name;
  fs::create_directories(logs);
  for (std::size_t i = 0; i < spec.cells.size(); ++i)
    write_resolved_cell(experiments[i], logs / fmt::format("cell-{}.toml", numbers.cells[i]));
  const std::string program = self_executable();
  fmt::print("sweep '{}' ({}): {} cells, {} finished before, {} to run, {} at a time; logs in {}\n",
             spec.name, spec.file, tally.cells, tally.finished, pending.size(), options.jobs,
             logs.string());
  if (resumed > 0)
    fmt::print("{} of them continue their interrupted run from its newest checkpoint\n", resumed);
  if (!retrained.empty())
    fmt::print("{} trained an experiment other than the cell's recorded one, and run again\n",
               fmt::join(retrained, ", "));
  if (tally.failed > 0 && !options.retry_failed)
    fmt::print("{} cells failed before and are skipped: --retry-failed runs them again\n",
               tally.failed);

  install_interrupt_handler();
  SweepProgress progress(spec.name, tally);
  std::vector<RunningCell> running;
  std::vector<std::string> failures;
  bool forwarded = false;
  std::size_t next = 0;
  // After Ctrl-C no cell starts; the loop waits for the running ones to stop.
  while ((!forwarded && next < pending.size()) || !running.empty()) {
    if (interrupt_requested() && !forwarded) {
      // Ctrl-C at a terminal reaches the cells too; a signal to this process alone is passed on.
      for (const RunningCell& r : running) kill(r.pid, SIGINT);
      forwarded = true;
    }
    for (auto r = running.begin(); r != running.end();) {
      int status = 0;
      if (waitpid(r->pid, &status, WNOHANG) != r->pid) {
        ++r;
        continue;
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - r->started).count();
      const int code = exit_code(status);
      if (code == 0) {
        progress.finished(seconds);
      } else if (code == 130) {
        progress.stopped();
      } else {
        progress.failed();
        failures.push_back(fmt::format("cell {} ({}) {}: {} (log: {})", r->cell.number,
                                       r->cell.cell->label(), how_it_ended(status),
                                       last_line(r->log), r->log.string()));
      }
      r = running.erase(r);
    }
    while (!forwarded && next < pending.size() &&
           static_cast<int64_t>(running.size()) < options.jobs) {
      const PendingCell& cell = pending[next++];
      const fs::path log = logs / fmt::format("cell-{}.log", cell.number);
      const std::vector<std::string> command =
          cell.resume ? std::vector<std::string>{program, "resume", std::to_string(*cell.resume),
                                                 "--db", database}
                      : cell_command(program, spec, logs / fmt::format("cell-{}.toml", cell.number),
                                     database, {numbers.sweep, cell.number}, cell.overrides);
      const pid_t pid = start_cell(command, log);
      running.push_back({cell, pid, log, std::chrono::steady_clock::now()});
      progress.started();
    }
    progress.show(static_cast<int64_t>(pending.size() - next), static_cast<int64_t>(running.size()),
                  options.jobs);
    if (!running.empty()) std::this_thread::sleep_for(kPollInterval);
  }
  progress.finish();

  for (const std::string& failure : failures) fmt::print(stderr, "{}\n", failure);
  fmt::print("results: lrmoe query \"SELECT * FROM sweep_results WHERE sweep = '{}'\" --db {}\n",
             spec.name, database);
  if (forwarded) return 130;
  if (!failures.empty() || progress.tally().failed > 0)
    throw std::runtime_error(fmt::format(
        "{}: {} of {} cells failed (see above and their logs); fix them and run the sweep again "
        "with --retry-failed",
        spec.file, progress.tally().failed, tally.cells));
  return 0;
}

}  // namespace lrmoe
