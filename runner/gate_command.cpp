#include "runner/gate_command.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "core/config/experiment_loader.hpp"
#include "core/config/toml_text.hpp"
#include "runner/capacity_calibration.hpp"
#include "runner/count_option.hpp"
#include "runner/database_option.hpp"
#include "runner/seed_statistics.hpp"
#include "runner/sweep_command.hpp"
#include "runner/text_table.hpp"
#include "store/results_store.hpp"

namespace fs = std::filesystem;

namespace lrmoe {
namespace {

constexpr double kNotReached = std::numeric_limits<double>::infinity();
constexpr const char* kCapacityKey = "policies.placement.fixed_ownership.capacity";
constexpr const char* kFactorKey = "policies.placement.fixed_ownership.capacity_factor";

// An arm's settings as a sweep variant: fixed ownership with this forward capacity.
std::string arm_variant(const std::string& factor, int64_t capacity) {
  return fmt::format("\"{}\" = {}, \"{}\" = {}", kFactorKey, factor, kCapacityKey, capacity);
}

// An arm's runs, one per seed.
struct ArmRuns {
  std::vector<double> steps;  // to target; +infinity where a seed did not reach it
  double dropped = 0;         // fraction of routed pairs dropped in forward, over every run
};

std::string sql_text(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  return quoted + "'";
}

// A sweep over the seeds of the gate's arms, each arm one variant of fixed ownership's settings.
fs::path write_sweep(const fs::path& folder, const std::string& name, const GateOptions& options,
                     const std::vector<std::string>& arms) {
  std::string toml = "# Written by `lrmoe gate` (runner/gate_command.cpp); run again to resume.\n";
  toml += "name = " + toml_string(name) + "\n";
  toml += "experiment = " + toml_string(fs::absolute(options.file).string()) + "\n";
  toml += "set = [";
  std::vector<std::string> set = options.overrides;
  // Fixed ownership whatever the experiment names: the four plugins of the bundle, explicitly.
  set.insert(set.end(), {"policies.bundle=fixed", "policies.placement.name=fixed_ownership",
                         "policies.metric.name=gate", "policies.selection.name=keep_all",
                         "policies.routing.name=owner"});
  for (std::size_t i = 0; i < set.size(); ++i) toml += (i ? ", " : "") + toml_string(set[i]);
  toml += "]\n\n[[axis]]\nvariants = [\n";
  for (const std::string& arm : arms) toml += "  { " + arm + " },\n";
  toml += "]\n\n[[axis]]\nkey = \"experiment.seed\"\nvalues = [";
  for (int64_t seed = 1; seed <= options.seeds; ++seed)
    toml += (seed > 1 ? ", " : "") + std::to_string(seed);
  toml += "]\n";
  fs::create_directories(folder);
  const fs::path file = folder / (name + ".toml");
  std::ofstream stream(file);
  stream << toml;
  if (!stream.flush()) {
    throw std::runtime_error(fmt::format(
        "cannot write the gate's sweep file {}: check that its folder is writable", file.string()));
  }
  return file;
}

// False when Ctrl-C stopped it.
bool run_sweep(const fs::path& file, const std::string& database, const GateOptions& options) {
  SweepOptions sweep;
  sweep.file = file.string();
  sweep.database = database;
  sweep.jobs = options.jobs;
  return sweep_command(sweep) == 0;
}

// The last finished run of each seed 1..N of the cells of sweep `name` whose forward capacity
// is `capacity` and capacity factor `factor` (as recorded), in seed order. Exactly N, or the
// arm is incomplete and the gate says how to complete it.
std::vector<int64_t> arm_runs(const ResultsStore& store, const std::string& name,
                              const fs::path& sweep_file, const std::string& database,
                              const std::string& factor, int64_t capacity, int64_t seeds) {
  const QueryResult rows = store.query(fmt::format(
      "SELECT r.run FROM sweep_results r JOIN sweeps s ON s.name = r.sweep "
      "JOIN sweep_cell_values seed ON seed.sweep = s.id AND seed.cell = r.cell "
      "  AND seed.key = 'experiment.seed' "
      "JOIN sweep_cell_values capacity ON capacity.sweep = s.id AND capacity.cell = r.cell "
      "  AND capacity.key = {} "
      "JOIN sweep_cell_values factor ON factor.sweep = s.id AND factor.cell = r.cell "
      "  AND factor.key = {} "
      "WHERE r.sweep = {} AND r.status = 'finished' AND capacity.value = {} AND factor.value = {} "
      "  AND CAST(seed.value AS INTEGER) BETWEEN 1 AND {} "
      "ORDER BY CAST(seed.value AS INTEGER)",
      sql_text(kCapacityKey), sql_text(kFactorKey), sql_text(name),
      sql_text(std::to_string(capacity)), sql_text(factor), seeds));
  std::vector<int64_t> runs;
  for (const auto& row : rows.rows) runs.push_back(std::stoll(row[0].value()));
  if (static_cast<int64_t>(runs.size()) != seeds) {
    throw std::runtime_error(fmt::format(
        "{}: {} of the {} seeds of the arm with capacity factor {} and capacity {} finished in "
        "sweep '{}'; finish them with `lrmoe sweep {} --db {} --retry-failed`, then run the gate "
        "again",
        database, runs.size(), seeds, factor, capacity, name, sweep_file.string(), database));
  }
  return runs;
}

std::string run_list(const std::vector<int64_t>& runs) {
  return fmt::format("{}", fmt::join(runs, ", "));
}

ArmRuns arm_figures(const ResultsStore& store, const std::vector<int64_t>& runs) {
  ArmRuns arm;
  int64_t routed = 0;
  int64_t dropped = 0;
  for (const RunFigures& run : store.run_figures(runs)) {
    arm.steps.push_back(run.time_to_target ? static_cast<double>(run.time_to_target->step)
                                           : kNotReached);
    routed += run.pairs_routed;
    dropped += run.pairs_dropped;
  }
  arm.dropped = routed > 0 ? static_cast<double>(dropped) / static_cast<double>(routed) : 0;
  return arm;
}

// Every recorded pass's per-expert loads of `runs`, each run's every step and MoE layer.
std::vector<ExpertLoads> recorded_loads(const ResultsStore& store, const std::vector<int64_t>& runs,
                                        int64_t max_steps) {
  std::vector<ExpertLoads> passes;
  for (const int64_t run : runs) {
    for (auto& step : store.expert_load_history(run, max_steps).pairs)
      passes.insert(passes.end(), step.begin(), step.end());
  }
  return passes;
}

std::string steps_text(const std::vector<double>& steps) {
  const SeedSpread spread = seed_spread(steps);
  int64_t missed = 0;
  for (const double s : steps) missed += std::isinf(s);
  auto value = [](double v) {
    return std::isinf(v) ? std::string("not reached") : fmt::format("{:.0f}", v);
  };
  std::string text =
      fmt::format("{} [{}, {}]", value(spread.median), value(spread.low), value(spread.high));
  if (missed > 0) text += fmt::format(" ({} of {} missed)", missed, steps.size());
  return text;
}

}  // namespace

CLI::App* add_gate_command(CLI::App& app, GateOptions& options) {
  CLI::App* gate = app.add_subcommand(
      "gate",
      "does the workload react to dropped pairs? fixed ownership dropless, dropping about half "
      "the pairs, and with the MoE removed, over seeds (resumable); exit 3 when it fails");
  gate->add_option("experiment", options.file, "experiment TOML file")->required();
  gate->add_option("--set", options.overrides, "override a field: section.key=value (repeatable)")
      ->allow_extra_args(false);
  gate->add_option("--seeds", options.seeds, "seeds per arm: 1 to N")->check(count_between(3, 100));
  gate->add_option("-j,--jobs", options.jobs, "runs at once (cores split evenly)")
      ->check(count_between(1));
  add_database_option(gate, options.database,
                      "results database (default: the experiment's store.path)");
  return gate;
}

int gate_command(const GateOptions& options, std::ostream& out) {
  const Experiment experiment = load_experiment(options.file, options.overrides);
  const std::string database = options.database.value_or(experiment.store.path);
  const fs::path folder =
      fs::absolute(database).parent_path() / (fs::path(database).stem().string() + "-sweeps");
  const std::string name = "gate-" + experiment.experiment.name;

  // Dropless and the routed experts removed first: the middle arm is calibrated on the dropless
  // runs' loads. Every arm sets both capacity keys, so that the experiment's own cannot change it.
  const fs::path first =
      write_sweep(folder, name, options, {arm_variant("0.0", -1), arm_variant("0.0", 0)});
  if (!run_sweep(first, database, options)) return 130;
  auto store = ResultsStore::open_read_only(database);
  const std::vector<int64_t> dropless_runs =
      arm_runs(*store, name, first, database, "0.0", -1, options.seeds);
  const std::vector<int64_t> removed_runs =
      arm_runs(*store, name, first, database, "0.0", 0, options.seeds);
  const std::vector<ExpertLoads> loads =
      recorded_loads(*store, dropless_runs, experiment.train.max_steps);
  const double factor = std::round(capacity_factor_dropping(loads, options.half) * 1000) / 1000;
  // The factor names its sweep: another calibration (other seeds, other runs) is another arm.
  const std::string half_name = fmt::format("{}-half-{}", name, toml_float(factor));
  const fs::path second =
      write_sweep(folder, half_name, options, {arm_variant(toml_float(factor), -1)});
  if (!run_sweep(second, database, options)) return 130;
  store = ResultsStore::open_read_only(database);
  const std::vector<int64_t> half_runs =
      arm_runs(*store, half_name, second, database, toml_float(factor), -1, options.seeds);

  const ArmRuns dropless = arm_figures(*store, dropless_runs);
  const ArmRuns half = arm_figures(*store, half_runs);
  const ArmRuns removed = arm_figures(*store, removed_runs);

  out << fmt::format(
      "\nsensitivity gate: {} ({}), fixed ownership, {} seeds, steps to eval loss {}\n",
      options.file, experiment.experiment.name, options.seeds, experiment.train.target_loss);
  QueryResult table;
  table.columns = {"arm",
                   "forward capacity",
                   "pairs dropped",
                   "steps to target: median [range]",
                   "extra steps vs dropless [95% interval]",
                   "runs"};
  auto extra = [&](const ArmRuns& arm) -> std::string {
    if (!std::isfinite(seed_spread(arm.steps).median)) return "target not reached";
    const std::optional<Reduction> r = bootstrap_reduction(arm.steps, dropless.steps);
    if (!r) return "-";
    return fmt::format("{:+.0f}% [{:+.0f}%, {:+.0f}%]", -100 * r->estimate, -100 * r->high,
                       -100 * r->low);
  };
  table.rows.push_back({"dropless", "none", fmt::format("{:.1f}%", 100 * dropless.dropped),
                        steps_text(dropless.steps), "", run_list(dropless_runs)});
  table.rows.push_back({fmt::format("about {:.0f}% dropped", 100 * options.half),
                        fmt::format("capacity factor {}", factor),
                        fmt::format("{:.1f}%", 100 * half.dropped), steps_text(half.steps),
                        extra(half), run_list(half_runs)});
  table.rows.push_back({"MoE removed", "0 pairs", fmt::format("{:.1f}%", 100 * removed.dropped),
                        steps_text(removed.steps), extra(removed), run_list(removed_runs)});
  out << render_text_table(table, 60) << "\n";

  const SeedSpread base = seed_spread(dropless.steps);
  const std::optional<Reduction> half_cost = bootstrap_reduction(half.steps, dropless.steps);
  const bool reaches = std::isfinite(base.median);
  // A reduction below zero is a cost: the interval excludes zero when its upper end is below it.
  const bool half_costs = reaches && half_cost && half_cost->high < 0;
  // A missed target stands for "at least twice the steps" only if max_steps left room for them.
  const double removed_median = seed_spread(removed.steps).median;
  const bool room = static_cast<double>(experiment.train.max_steps) >= 2 * base.median;
  const bool removal_costs =
      reaches && (std::isfinite(removed_median) ? removed_median >= 2 * base.median : room);
  if (reaches && !room && !std::isfinite(removed_median)) {
    out << fmt::format(
        "train.max_steps = {} is below twice the dropless steps ({:.0f}): the removed MoE's missed "
        "target does not show that it needs twice the steps; raise train.max_steps\n",
        experiment.train.max_steps, base.median);
  }
  // Routing adapts to the drops, so the calibrated factor may drop more or less in training.
  if (std::abs(half.dropped - options.half) > 0.1) {
    out << fmt::format(
        "the half arm dropped {:.1f}% of the pairs in training, not about {:.0f}%: routing moved "
        "under the drops; read its row as that fraction\n",
        100 * half.dropped, 100 * options.half);
  }
  out << fmt::format("dropless reaches the target (median): {}\n", reaches ? "yes" : "no");
  out << fmt::format("dropping about half the pairs costs steps, interval excluding zero: {}\n",
                     half_costs ? "yes" : "no");
  out << fmt::format("removing the MoE misses the target or takes at least twice the steps: {}\n",
                     removal_costs ? "yes" : "no");
  const bool pass = reaches && half_costs && removal_costs;
  out << (pass ? "PASS: this workload reacts to dropped pairs; policy comparisons on it measure "
                 "convergence\n"
               : "FAIL: this workload does not react enough to dropped pairs for a policy "
                 "comparison on it to mean anything\n");
  return pass ? 0 : 3;
}

}  // namespace lrmoe
