#include "runner/gate_arms.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>

#include "core/config/toml_text.hpp"
#include "runner/count_option.hpp"
#include "runner/database_option.hpp"
#include "runner/seed_statistics.hpp"
#include "runner/sweep_command.hpp"

namespace fs = std::filesystem;

namespace lrmoe {
namespace {

constexpr double kNotReached = std::numeric_limits<double>::infinity();
constexpr const char* kSeedKey = "experiment.seed";

std::string sql_text(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  return quoted + "'";
}

// A setting's value as the sweep records it: strings without their quotes.
std::string recorded_text(const std::string& toml) {
  if (toml.size() >= 2 && toml.front() == '"' && toml.back() == '"')
    return toml.substr(1, toml.size() - 2);
  return toml;
}

fs::path sweep_file(const ArmSweeps& sweeps, const std::string& name) {
  return sweeps.folder / (name + ".toml");
}

// Whether a run's cell is exactly `arm` (its settings and the seed, nothing else).
bool cell_is_arm(const std::vector<std::pair<std::string, std::string>>& values,
                 const GateArm& arm) {
  if (values.size() != arm.settings.size() + 1) return false;
  std::map<std::string, std::string> cell(values.begin(), values.end());
  for (const auto& [key, toml] : arm.settings) {
    const auto it = cell.find(key);
    if (it == cell.end() || it->second != recorded_text(toml)) return false;
  }
  return cell.count(kSeedKey) == 1;
}

std::optional<Reduction> reduction(const std::vector<double>& arm,
                                   const std::vector<double>& baseline) {
  if (!std::isfinite(seed_spread(baseline).median)) return std::nullopt;
  return bootstrap_reduction(arm, baseline);
}

}  // namespace

GateArm fixed_ownership_arm(std::string label, std::string forward,
                            std::vector<std::pair<std::string, std::string>> settings) {
  std::vector<std::pair<std::string, std::string>> all = {
      {"policies.bundle", "\"fixed\""},
      {"policies.placement.name", "\"fixed_ownership\""},
      {"policies.metric.name", "\"gate\""},
      {"policies.selection.name", "\"keep_all\""},
      {"policies.routing.name", "\"owner\""}};
  all.insert(all.end(), settings.begin(), settings.end());
  return {std::move(label), std::move(all), std::move(forward)};
}

void add_arm_command_options(CLI::App& command, ArmCommandOptions& options) {
  command.add_option("experiment", options.file, "experiment TOML file")->required();
  command
      .add_option("--set", options.overrides, "override a field: section.key=value (repeatable)")
      ->allow_extra_args(false);
  command.add_option("--seeds", options.seeds, "seeds per arm: 1 to N (default 5)")
      ->check(count_between(3, 100));
  command.add_option("-j,--jobs", options.jobs, "runs at once (cores split evenly)")
      ->check(count_between(1));
  add_database_option(&command, options.database,
                      "results database (default: the experiment's store.path)");
}

ArmSweeps arm_sweeps(const ArmCommandOptions& options, const std::string& database) {
  ArmSweeps sweeps;
  sweeps.experiment = options.file;
  sweeps.overrides = options.overrides;
  sweeps.seeds = options.seeds;
  sweeps.jobs = options.jobs;
  sweeps.database = options.database.value_or(database);
  sweeps.folder = fs::absolute(sweeps.database).parent_path() /
                  (fs::path(sweeps.database).stem().string() + "-sweeps");
  return sweeps;
}

bool run_arms(const ArmSweeps& sweeps, const std::string& name, const std::vector<GateArm>& arms) {
  std::string toml =
      "# Written by `lrmoe gate` or `lrmoe positive-control` (runner/gate_arms.cpp); run again "
      "to resume.\n";
  toml += "name = " + toml_string(name) + "\n";
  toml += "experiment = " + toml_string(fs::absolute(sweeps.experiment).string()) + "\n";
  toml += "set = [";
  for (std::size_t i = 0; i < sweeps.overrides.size(); ++i)
    toml += (i ? ", " : "") + toml_string(sweeps.overrides[i]);
  toml += "]\n\n[[axis]]\nvariants = [\n";
  // Each arm named by its label, so that `lrmoe compare` of the sweep names it as the gate's
  // table does (a label is a name, not part of the cell's identity).
  for (const GateArm& arm : arms) {
    toml += "  { label = " + toml_string(arm.label);
    for (const auto& [key, value] : arm.settings)
      toml += fmt::format(", {} = {}", toml_string(key), value);
    toml += " },\n";
  }
  toml += fmt::format("]\n\n[[axis]]\nkey = \"{}\"\nvalues = [", kSeedKey);
  for (int64_t seed = 1; seed <= sweeps.seeds; ++seed)
    toml += (seed > 1 ? ", " : "") + std::to_string(seed);
  toml += "]\n";
  fs::create_directories(sweeps.folder);
  const fs::path file = sweep_file(sweeps, name);
  std::ofstream stream(file);
  stream << toml;
  if (!stream.flush()) {
    throw std::runtime_error(fmt::format(
        "cannot write the sweep file {}: check that its folder is writable", file.string()));
  }
  SweepOptions sweep;
  sweep.file = file.string();
  sweep.database = sweeps.database;
  sweep.jobs = sweeps.jobs;
  return sweep_command(sweep) == 0;
}

std::vector<ArmFigures> arm_figures(const ResultsStore& store, const ArmSweeps& sweeps,
                                    const std::string& name, const std::vector<GateArm>& arms) {
  const QueryResult rows = store.query(fmt::format(
      "SELECT run FROM sweep_results WHERE sweep = {} AND status = 'finished'", sql_text(name)));
  std::vector<int64_t> finished;
  for (const auto& row : rows.rows) finished.push_back(std::stoll(row[0].value()));
  const std::vector<RunFigures> figures = store.run_figures(finished);

  std::vector<ArmFigures> result;
  for (const GateArm& arm : arms) {
    // The last finished run of each seed of this arm.
    std::map<int64_t, const RunFigures*> by_seed;
    for (const RunFigures& run : figures) {
      if (!cell_is_arm(run.cell_values, arm)) continue;
      const auto seed = static_cast<int64_t>(run.seed);
      if (seed < 1 || seed > sweeps.seeds) continue;
      const RunFigures*& last = by_seed[seed];
      if (last == nullptr || last->run < run.run) last = &run;
    }
    if (static_cast<int64_t>(by_seed.size()) != sweeps.seeds) {
      throw std::runtime_error(fmt::format(
          "{}: {} of the {} seeds of the arm '{}' finished in sweep '{}'; finish them with "
          "`lrmoe sweep {} --db {} --retry-failed`, then run this command again",
          sweeps.database, by_seed.size(), sweeps.seeds, arm.label, name,
          sweep_file(sweeps, name).string(), sweeps.database));
    }
    ArmFigures out;
    int64_t routed = 0, dropped = 0, kept = 0;
    double replicas = 0;
    for (const auto& [seed, run] : by_seed) {
      out.runs.push_back(run->run);
      out.steps.push_back(run->time_to_target ? static_cast<double>(run->time_to_target->step)
                                              : kNotReached);
      out.modeled.push_back(run->time_to_target ? run->time_to_target->moe_modeled_seconds
                                                : kNotReached);
      routed += run->pairs_routed;
      dropped += run->pairs_dropped;
      kept += run->pairs_kept;
      replicas += run->replicas.value_or(0.0);
    }
    out.routed = routed > 0;
    if (out.routed) {
      out.dropped = static_cast<double>(dropped) / static_cast<double>(routed);
      out.kept = static_cast<double>(kept) / static_cast<double>(routed);
    }
    out.replicas = replicas / static_cast<double>(by_seed.size());
    result.push_back(std::move(out));
  }
  return result;
}

std::string steps_text(const std::vector<double>& steps) {
  const SeedSpread spread = seed_spread(steps);
  const auto missed =
      std::count_if(steps.begin(), steps.end(), [](double s) { return std::isinf(s); });
  auto value = [](double v) {
    return std::isinf(v) ? std::string("not reached") : fmt::format("{:.0f}", v);
  };
  std::string text =
      fmt::format("{} [{}, {}]", value(spread.median), value(spread.low), value(spread.high));
  if (missed > 0) text += fmt::format(" ({} of {} missed)", missed, steps.size());
  return text;
}

std::string extra_steps_text(const std::vector<double>& arm, const std::vector<double>& baseline) {
  if (!std::isfinite(seed_spread(baseline).median)) return "baseline missed the target";
  if (!std::isfinite(seed_spread(arm).median)) return "target not reached";
  const std::optional<Reduction> r = reduction(arm, baseline);
  if (!r) return "-";
  // + 0.0: no "-0%" for a reduction of zero.
  return fmt::format("{:+.0f}% [{:+.0f}%, {:+.0f}%]", -100 * r->estimate + 0.0,
                     -100 * r->high + 0.0, -100 * r->low + 0.0);
}

std::string break_even_text(const std::vector<double>& arm, const std::vector<double>& baseline) {
  if (!std::isfinite(seed_spread(baseline).median)) return "-";
  if (!std::isfinite(seed_spread(arm).median)) return "0 (target not reached)";
  const std::optional<Reduction> r = reduction(arm, baseline);
  if (!r) return "-";
  // arm / baseline = 1 - reduction, so baseline / arm = 1 / (1 - reduction); a resampled
  // reduction of minus infinity (a resample of missed seeds) is a ratio of 0.
  auto ratio = [](double reduction) {
    return std::isinf(reduction) ? 0.0 : 1.0 / (1.0 - reduction);
  };
  return fmt::format("{:.2f} [{:.2f}, {:.2f}]", ratio(r->estimate), ratio(r->low), ratio(r->high));
}

bool costs_steps(const std::vector<double>& arm, const std::vector<double>& baseline) {
  if (!std::isfinite(seed_spread(baseline).median)) return false;
  if (!std::isfinite(seed_spread(arm).median)) return true;
  const std::optional<Reduction> r = reduction(arm, baseline);
  // A reduction below zero is a cost: the interval excludes zero when its upper end is below it.
  return r && r->high < 0;
}

}  // namespace lrmoe
