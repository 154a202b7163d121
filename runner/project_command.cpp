#include "runner/project_command.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/config/model_presets.hpp"
#include "core/pipeline/instance_table.hpp"
#include "core/replay/plan_replay.hpp"
#include "runner/count_option.hpp"
#include "runner/database_option.hpp"
#include "runner/named_runs.hpp"
#include "runner/replay_command.hpp"
#include "runner/text_table.hpp"
#include "store/results_store.hpp"

namespace lrmoe {
namespace {

namespace fs = std::filesystem;

// One training run, ready to project: its experiment with the full-size model, its loads.
struct ProjectedRun {
  RunSummary summary;
  std::string full_model;
  fs::path experiment_file;     // the run's experiment at the full-size model, written for replay
  std::string memory_per_rank;  // the budget at full size
  int64_t slots_per_rank = 0;
  int64_t owned_per_rank = 0;  // at the run's size: slots are scaled by the owned experts
  ExpertLoadHistory loads;
  int64_t steps = 0;  // to the target, or the run's steps when it missed
  bool reached = false;
};

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The run's resolved experiment with `model` in place of its own and synthetic data (the replay
// makes its pairs from the loads; the run's data file need not be here).
std::string experiment_at(const std::string& resolved_toml, const std::string& model) {
  toml::table experiment = toml::parse(resolved_toml);
  experiment.insert_or_assign("model", toml::table{{"preset", model}});
  experiment.insert_or_assign("data", toml::table{{"kind", "synthetic"}});
  std::ostringstream text;
  text << experiment;
  return text.str();
}

// How many steps before a sampled one are replayed first: a placement that plans from history
// has it, and the kept step's owners moved from a steady plan, not from a warm-up one.
constexpr int64_t kLeadSteps = 2;

// `samples` steps spread over [kLeadSteps + 1, steps].
std::vector<int64_t> sampled_steps(int64_t steps, int64_t samples) {
  std::vector<int64_t> chosen;
  for (int64_t i = 1; i <= samples; ++i) {
    const int64_t s = std::max<int64_t>(kLeadSteps + 1, ceil_div(steps * i, samples));
    if (chosen.empty() || chosen.back() != s) chosen.push_back(s);
  }
  return chosen;
}

// The loads of `step` and the kLeadSteps before it, as replay steps 1, 2, ...
RecordedExpertLoads steps_up_to(const ExpertLoadHistory& loads, int64_t step, int64_t run) {
  RecordedExpertLoads recorded{
      fmt::format("run {}, steps {} to {}", run, step - kLeadSteps, step), {}, {}};
  for (int64_t s = step - kLeadSteps; s <= step; ++s) {
    const auto it = std::find(loads.steps.begin(), loads.steps.end(), s);
    if (it == loads.steps.end())
      throw std::invalid_argument(
          fmt::format("project: run {} recorded no per-expert loads at step {}", run, s));
    recorded.steps.push_back(s);
    recorded.pairs.push_back(loads.pairs[static_cast<std::size_t>(it - loads.steps.begin())]);
  }
  return recorded;
}

ProjectedRun prepare_run(const ResultsStore& store, int64_t id,
                         const std::optional<std::string>& model, int64_t samples,
                         const fs::path& folder) {
  std::optional<RunSummary> summary = store.find_run(id);
  if (!summary) throw std::invalid_argument(fmt::format("project: no run {} in the database", id));
  if (summary->replay)
    throw std::invalid_argument(
        fmt::format("project: run {} is a replay; project training runs", id));
  ProjectedRun p;
  p.summary = *summary;
  const toml::table experiment = toml::parse(summary->resolved_toml);
  const std::string preset = experiment["model"]["preset"].value_or(std::string());
  const std::optional<std::string> full = model ? model : full_size_preset(preset);
  if (!full || !find_preset(*full)) {
    throw std::invalid_argument(fmt::format(
        "project: run {} trained model '{}', which has no full-size preset; name one with --model "
        "({})",
        id, preset.empty() ? "custom" : preset, fmt::join(preset_names(), ", ")));
  }
  p.full_model = *full;
  const int64_t ranks = experiment["cluster"]["ranks"].value_or(int64_t{1});
  const int64_t experts = experiment["model"]["num_experts"].value_or(int64_t{0});
  p.slots_per_rank = experiment["cluster"]["slots_per_rank"].value_or(int64_t{0});
  p.owned_per_rank = ceil_div(experts, ranks);
  // A budget relative to fixed ownership's need keeps its meaning at any size; an absolute one
  // was chosen for the run's size (a mini model's 80 GiB binds nothing there), so the
  // projection gives the full-size model room to spare instead.
  const std::string budget = experiment["cluster"]["memory_per_rank"].value_or(std::string());
  p.memory_per_rank = budget.find("x fixed") != std::string::npos ? budget : "100x fixed";
  p.reached = summary->time_to_target.has_value();
  p.steps = p.reached ? summary->time_to_target->step : summary->steps;
  if (p.steps <= kLeadSteps) {
    throw std::invalid_argument(fmt::format(
        "project: run {} has {} step(s); a projection replays {} steps before each sampled one", id,
        p.steps, kLeadSteps));
  }
  p.loads = store.expert_load_history(id, std::numeric_limits<int64_t>::max());
  p.experiment_file = folder / fmt::format("run-{}-{}.toml", id, p.full_model);
  std::ofstream(p.experiment_file) << experiment_at(summary->resolved_toml, p.full_model);
  for (const int64_t step : sampled_steps(p.steps, samples)) steps_up_to(p.loads, step, id);
  return p;
}

ProjectionRecord project(const ProjectedRun& run, int64_t ranks, int64_t tokens_per_rank,
                         const std::string& profile, int64_t samples) {
  ProjectionRecord record;
  record.run = run.summary.id;
  record.model = run.full_model;
  record.ranks = ranks;
  record.tokens_per_rank = tokens_per_rank;
  record.profile = profile;
  record.steps = run.steps;
  record.reached = run.reached;
  std::vector<std::string> settings = {
      fmt::format("cluster.ranks={}", ranks),
      fmt::format("cluster.profile={}", profile),
      fmt::format("train.batch_size={}", ranks),
      fmt::format("train.seq_len={}", tokens_per_rank),
      "train.micro_batches=1",
      fmt::format("cluster.memory_per_rank={}", run.memory_per_rank)};
  record.memory_per_rank = run.memory_per_rank;
  if (run.slots_per_rank > 0) {
    // The run's slots per owned expert, at this size's owned experts.
    const int64_t owned = ceil_div(find_preset(run.full_model)->num_experts, ranks);
    settings.push_back(fmt::format("cluster.slots_per_rank={}",
                                   ceil_div(run.slots_per_rank * owned, run.owned_per_rank)));
  }
  const std::vector<int64_t> chosen = sampled_steps(run.steps, samples);
  record.sampled_steps = fmt::format("{}", fmt::join(chosen, ","));
  const int64_t run_layers = static_cast<int64_t>(run.loads.layers.size());
  double compute = 0, all_to_all = 0, gathers = 0, transfers = 0;
  for (const int64_t step : chosen) {
    ExperimentSource source;
    source.file = run.experiment_file.string();
    // Loaded afresh for every sample: a policy that keeps state starts it anew.
    ReplayExperiment r = prepare_replay(source, settings, fmt::format("run {}", record.run));
    const int64_t full_layers = moe_layer_count(r.experiment.model);
    auto loads = std::make_shared<RecordedLoads>(steps_up_to(run.loads, step, record.run),
                                                 r.experiment.model.num_experts, run_layers);
    try {
      // One full-size layer per layer of the run (each with the full model's per-layer budget):
      // the full model's layers that read the same source layer plan alike.
      PlanReplay replay(r.experiment, r.policies, r.profile, loads,
                        std::min(run_layers, full_layers));
      for (int64_t lead = 1; lead <= kLeadSteps; ++lead) replay.step(lead);
      const StepReport report = replay.step(kLeadSteps + 1);
      const double scale =
          static_cast<double>(full_layers) / static_cast<double>(std::min(run_layers, full_layers));
      for (const LayerStepStatistics& layer : report.layers) {
        compute += scale * layer.modeled.compute();
        all_to_all += scale * layer.modeled.all_to_all;
        gathers += scale * layer.modeled.gathers;
        transfers += scale * layer.modeled.replicas;
      }
    } catch (const PlanError& error) {
      record.failed = fmt::format("step {}: {}", step, error.what());
      return record;
    }
  }
  const auto n = static_cast<double>(chosen.size());
  record.compute_seconds = compute / n;
  record.all_to_all_seconds = all_to_all / n;
  record.gather_seconds = gathers / n;
  record.transfer_seconds = transfers / n;
  record.projected_seconds =
      static_cast<double>(record.steps) * (record.compute_seconds + record.all_to_all_seconds +
                                           record.gather_seconds + record.transfer_seconds);
  return record;
}

std::string share(double part, const ProjectionRecord& p) {
  const double total =
      p.compute_seconds + p.all_to_all_seconds + p.gather_seconds + p.transfer_seconds;
  return total > 0 ? fmt::format("{:.0f}%", 100 * part / total) : "-";
}

}  // namespace

CLI::App* add_project_command(CLI::App& app, ProjectOptions& options) {
  CLI::App* project = app.add_subcommand(
      "project",
      "project training runs' MoE time to target at their model's full size: sampled steps of "
      "their recorded loads replayed over ranks, tokens per rank and hardware profiles");
  add_named_runs_options(project, options.runs, options.sweeps);
  add_database_option(project, options.database, "results database");
  project->add_option("--model", options.model,
                      "the full-size preset (default: the one each run's preset is scaled from)");
  project->add_option("--ranks", options.ranks, "expert-parallel ranks (comma-separated)")
      ->delimiter(',')
      ->check(count_between(1, 4096));
  project
      ->add_option("--tokens-per-rank", options.tokens_per_rank,
                   "tokens per rank and step (comma-separated)")
      ->delimiter(',')
      ->check(count_between(1, int64_t{1} << 20));
  project->add_option("--profile", options.profiles, "hardware profiles (comma-separated)")
      ->delimiter(',');
  project->add_option("--samples", options.samples, "steps replayed per run, spread to its target")
      ->check(count_between(1, 64));
  project
      ->add_option("--jobs", options.jobs,
                   "projections made at once (each replays on a thread of its own)")
      ->check(count_between(1, 64));
  project->add_flag("--again", options.again,
                    "remake projections the database holds already for the same sampled steps");
  return project;
}

int project_command(const ProjectOptions& options, std::ostream& out) {
  // A database that is not there is not made (open_read_only says so); one of an older schema
  // is upgraded. Every user error is found before the first projection is written.
  if (!fs::exists(options.database)) ResultsStore::open_read_only(options.database);
  const auto store = ResultsStore::open(options.database);
  const std::vector<int64_t> runs = named_runs(*store, options.runs, options.sweeps, "project");
  const fs::path folder = fs::temp_directory_path() / fmt::format("lrmoe-project-{}", ::getpid());
  fs::create_directories(folder);
  struct RemoveFolder {
    fs::path path;
    ~RemoveFolder() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } cleanup{folder};

  if (options.model && !find_preset(*options.model)) {
    throw std::invalid_argument(fmt::format("project: --model {}: not a model preset ({})",
                                            *options.model, fmt::join(preset_names(), ", ")));
  }
  for (const std::string& profile : options.profiles) {
    try {
      for (const int64_t ranks : options.ranks) resolve_hardware_profile(profile, ranks);
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(fmt::format("project: --profile {}: {}", profile, error.what()));
    }
  }
  std::vector<ProjectedRun> prepared;
  for (const int64_t id : runs) {
    // A run that failed in its first steps (a plan that never fit) has no loads to replay; it
    // never reaches its target, as lrmoe compare shows without a projection.
    const std::optional<RunSummary> summary = store->find_run(id);
    if (summary && summary->status == "failed" && summary->steps <= kLeadSteps) {
      spdlog::info("project: run {} failed after {} step(s): nothing to replay, skipped", id,
                   summary->steps);
      continue;
    }
    prepared.push_back(prepare_run(*store, id, options.model, options.samples, folder));
  }

  // Every (run, ranks, tokens, profile), in the table's order; those the database holds for
  // the same sampled steps are kept unless --again.
  struct Cell {
    const ProjectedRun* run;
    int64_t ranks, tokens;
    std::string profile;
    std::optional<ProjectionRecord> made;
  };
  std::vector<Cell> cells;
  const std::vector<ProjectionRecord> held =
      options.again ? std::vector<ProjectionRecord>{} : store->projections(runs);
  for (const ProjectedRun& run : prepared) {
    const std::string sampled =
        fmt::format("{}", fmt::join(sampled_steps(run.steps, options.samples), ","));
    for (const int64_t ranks : options.ranks) {
      for (const int64_t tokens : options.tokens_per_rank) {
        for (const std::string& profile : options.profiles) {
          Cell& cell = cells.emplace_back(Cell{&run, ranks, tokens, profile, std::nullopt});
          for (const ProjectionRecord& p : held) {
            if (p.run == run.summary.id && p.model == run.full_model && p.ranks == ranks &&
                p.tokens_per_rank == tokens && p.profile == profile && p.sampled_steps == sampled)
              cell.made = p;
          }
        }
      }
    }
  }
  const auto kept = static_cast<int64_t>(
      std::count_if(cells.begin(), cells.end(), [](const Cell& c) { return c.made.has_value(); }));
  if (kept > 0) {
    spdlog::info("project: {} of {} projections are in {} already and kept (--again remakes them)",
                 kept, cells.size(), options.database);
  }
  // Workers take the cells in order; each projection is recorded as it is made, under the lock.
  std::mutex lock;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  int64_t done = kept;
  auto work = [&] {
    for (std::size_t i = next++; i < cells.size() && !failed; i = next++) {
      Cell& cell = cells[i];
      if (cell.made) continue;
      try {
        ProjectionRecord p =
            project(*cell.run, cell.ranks, cell.tokens, cell.profile, options.samples);
        const std::lock_guard<std::mutex> guard(lock);
        store->add_projection(p);
        spdlog::info("project: {} of {}: run {}, {} x {}, {}: {}", ++done, cells.size(), p.run,
                     cell.ranks, cell.tokens, cell.profile,
                     p.failed ? "does not fit" : fmt::format("{:.1f} s", p.projected_seconds));
        cell.made = std::move(p);
      } catch (...) {
        const std::lock_guard<std::mutex> guard(lock);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> workers;
  for (int64_t j = 1; j < options.jobs; ++j) workers.emplace_back(work);
  work();
  for (std::thread& worker : workers) worker.join();
  if (error) std::rethrow_exception(error);

  QueryResult table;
  table.columns = {"run",   "model",   "ranks",      "tokens/rank", "profile",   "budget", "steps",
                   "MoE s", "compute", "all-to-all", "plan coll.",  "transfers", "note"};
  for (const Cell& cell : cells) {
    const ProjectionRecord& p = *cell.made;
    table.rows.push_back({std::to_string(p.run), p.model, std::to_string(cell.ranks),
                          std::to_string(cell.tokens), cell.profile, p.memory_per_rank,
                          fmt::format("{}{}", p.steps, p.reached ? "" : " (missed)"),
                          p.failed ? std::string("-") : fmt::format("{:.1f}", p.projected_seconds),
                          share(p.compute_seconds, p), share(p.all_to_all_seconds, p),
                          share(p.gather_seconds, p), share(p.transfer_seconds, p),
                          p.failed ? "does not fit: " + *p.failed : std::string()});
  }
  out << render_text_table(table, 60, "-");
  out << "MoE s: modeled MoE seconds per step, the mean over the sampled steps, times the steps "
         "to target (all the run's steps when it missed); the parts are shares of it "
         "(Note [Projection at full size])\n";
  return 0;
}

}  // namespace lrmoe
