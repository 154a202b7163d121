#include "runner/gate_command.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/config/experiment_loader.hpp"
#include "core/config/toml_text.hpp"
#include "runner/capacity_calibration.hpp"
#include "runner/gate_arms.hpp"
#include "runner/seed_statistics.hpp"
#include "runner/text_table.hpp"
#include "store/results_store.hpp"

namespace lrmoe {
namespace {

constexpr const char* kCapacityKey = "policies.placement.fixed_ownership.capacity";
constexpr const char* kFactorKey = "policies.placement.fixed_ownership.capacity_factor";
constexpr const char* kDropKey = "policies.placement.fixed_ownership.drop";

// Fixed ownership with a forward capacity (factor, or -1 and a count in pairs), dropping
// `drop`'s pairs past it; every fixed arm sets the same keys.
GateArm capacity_arm(std::string label, std::string forward, const std::string& factor,
                     int64_t capacity, const char* drop, bool dense = false) {
  return fixed_ownership_arm(std::move(label), std::move(forward),
                             {{kFactorKey, factor},
                              {kCapacityKey, std::to_string(capacity)},
                              {kDropKey, toml_string(drop)},
                              {"model.moe_as_dense", dense ? "true" : "false"}});
}

// LRMoE's selection with the random metric at a keep fraction, placed as fixed ownership (no
// replicas) with memory to spare: every pair computed in forward, a random `keep` of them
// keeping their backward work within LRMoE's per-expert quotas.
GateArm backward_random_arm(double keep) {
  return {fmt::format("{:.0f}% backward work kept at random", 100 * keep),
          {{"policies.bundle", "\"lrmoe\""},
           {"policies.placement.name", "\"lrmoe\""},
           {"policies.metric.name", "\"random\""},
           {"policies.selection.name", "\"quota_topk\""},
           {"policies.routing.name", "\"capacity_aware\""},
           {"policies.placement.lrmoe.keep_fraction", toml_float(keep)},
           {"policies.placement.lrmoe.max_replicas", "0"},
           {"cluster.memory_per_rank", "\"100x fixed\""},
           {"model.moe_as_dense", "false"}},
          "every pair"};
}

std::string percent(double share) {
  return fmt::format("{:.1f}%", 100 * share);
}

}  // namespace

CLI::App* add_gate_command(CLI::App& app, GateOptions& options) {
  CLI::App* gate = app.add_subcommand(
      "gate",
      "does the model earn its experts, and does the workload react to dropped pairs? fixed "
      "ownership dropless, as a dense model of its active width, with the MoE removed, with about "
      "half the pairs dropped in forward by lowest gate and at random, and half the backward work "
      "dropped at random, over seeds (resumable); exit 3 when it fails");
  add_arm_command_options(*gate, options.arms);
  return gate;
}

int gate_command(const GateOptions& options, std::ostream& out) {
  const Experiment experiment = load_experiment(options.arms.file, options.arms.overrides);
  const ArmSweeps sweeps = arm_sweeps(options.arms, experiment.store.path);
  const std::string name = "gate-" + experiment.experiment.name;

  // The arms that need no calibration first: the half arms' capacity factor is calibrated on
  // the dropless runs' loads.
  const std::vector<GateArm> first = {
      capacity_arm("dropless", "every pair", "0.0", -1, "lowest_gate"),
      capacity_arm("dense, the MoE's active width", "dense FFN", "0.0", -1, "lowest_gate",
                   /*dense=*/true),
      capacity_arm("MoE removed", "0 pairs", "0.0", 0, "lowest_gate"),
      backward_random_arm(options.half)};
  if (!run_arms(sweeps, name, first)) return 130;
  auto store = ResultsStore::open_read_only(sweeps.database);
  std::vector<ArmFigures> figures = arm_figures(*store, sweeps, name, first);
  std::vector<PassLoads> loads;
  for (const int64_t run : figures[0].runs) {
    for (auto& step : store->expert_load_history(run, experiment.train.max_steps).pairs)
      loads.insert(loads.end(), step.begin(), step.end());
  }
  const double factor = std::round(capacity_factor_dropping(loads, options.half) * 1000) / 1000;
  // The factor names its sweep: another calibration (other seeds, other runs) is another arm.
  const std::string half_name = fmt::format("{}-half-{}", name, toml_float(factor));
  const std::string capped = fmt::format("capacity factor {}", factor);
  const std::vector<GateArm> second = {
      capacity_arm(fmt::format("about {:.0f}% dropped, lowest gates", 100 * options.half), capped,
                   toml_float(factor), -1, "lowest_gate"),
      capacity_arm(fmt::format("about {:.0f}% dropped at random", 100 * options.half), capped,
                   toml_float(factor), -1, "random")};
  if (!run_arms(sweeps, half_name, second)) return 130;
  store = ResultsStore::open_read_only(sweeps.database);
  for (ArmFigures& arm : arm_figures(*store, sweeps, half_name, second))
    figures.push_back(std::move(arm));
  const ArmFigures& dropless = figures[0];
  const ArmFigures& dense = figures[1];
  const ArmFigures& removed = figures[2];
  const ArmFigures& backward = figures[3];
  const ArmFigures& half = figures[4];
  const ArmFigures& random_half = figures[5];

  out << fmt::format("\nsensitivity gate: {} ({}), {} seeds, steps to eval loss {}\n",
                     options.arms.file, experiment.experiment.name, options.arms.seeds,
                     experiment.train.target_loss);
  QueryResult table;
  table.columns = {"arm",
                   "forward",
                   "pairs dropped",
                   "backward kept",
                   "steps to target: median [range]",
                   "extra steps vs dropless [95% interval]",
                   "break-even step cost vs dropless [95%]",
                   "runs"};
  std::vector<GateArm> arms = first;
  arms.insert(arms.end(), second.begin(), second.end());
  for (std::size_t i = 0; i < figures.size(); ++i) {
    const ArmFigures& arm = figures[i];
    const bool base = i == 0;
    table.rows.push_back({arms[i].label, arms[i].forward, arm.routed ? percent(arm.dropped) : "-",
                          arm.routed ? percent(arm.kept) : "-", steps_text(arm.steps),
                          base ? "" : extra_steps_text(arm.steps, dropless.steps),
                          base ? "" : break_even_text(arm.steps, dropless.steps),
                          fmt::format("{}", fmt::join(arm.runs, ", "))});
  }
  out << render_text_table(table, 60) << "\n";

  const SeedSpread base = seed_spread(dropless.steps);
  const bool reaches = std::isfinite(base.median);
  const bool half_costs = costs_steps(half.steps, dropless.steps);
  // A missed target stands for "at least twice the steps" only if max_steps left room for them.
  const double removed_median = seed_spread(removed.steps).median;
  const bool room = static_cast<double>(experiment.train.max_steps) >= 2 * base.median;
  const bool removal_costs =
      reaches && (std::isfinite(removed_median) ? removed_median >= 2 * base.median : room);
  // The MoE earns its experts unless it takes more steps than the dense model of its active
  // width with an interval that excludes zero.
  const bool earns = reaches && !costs_steps(dropless.steps, dense.steps);
  if (reaches && !room && !std::isfinite(removed_median)) {
    out << fmt::format(
        "train.max_steps = {} is below twice the dropless steps ({:.0f}): the removed MoE's missed "
        "target does not show that it needs twice the steps; raise train.max_steps\n",
        experiment.train.max_steps, base.median);
  }
  // Routing adapts to the drops, so the calibrated factor may drop more or less in training.
  for (const ArmFigures* arm : {&half, &random_half}) {
    if (std::abs(arm->dropped - options.half) > 0.1) {
      out << fmt::format(
          "a half arm dropped {} of the pairs in training, not about {:.0f}%: routing moved under "
          "the drops; read its row as that share\n",
          percent(arm->dropped), 100 * options.half);
    }
  }
  const auto yes = [](bool b) { return b ? "yes" : "no"; };
  out << fmt::format("dropless reaches the target (median): {}\n", yes(reaches));
  out << fmt::format(
      "the MoE is no worse than the dense model of its active width (interval of its extra "
      "steps not above zero): {}\n",
      yes(earns));
  out << fmt::format(
      "dropping about half the pairs by lowest gate costs steps, interval excluding zero: {}\n",
      yes(half_costs));
  out << fmt::format("removing the MoE misses the target or takes at least twice the steps: {}\n",
                     yes(removal_costs));
  out << fmt::format(
      "not in the verdict: dropping half at random in forward costs steps: {}; dropping half the "
      "backward work at random costs steps: {}{}\n",
      yes(costs_steps(random_half.steps, dropless.steps)),
      yes(costs_steps(backward.steps, dropless.steps)),
      costs_steps(backward.steps, dropless.steps)
          ? ""
          : " (backward selections cannot be told apart by steps on this workload)");
  const bool pass = reaches && earns && half_costs && removal_costs;
  out << (pass ? "PASS: the model earns its experts and the workload reacts to dropped pairs; "
                 "policy comparisons on it measure convergence\n"
               : "FAIL: the model does not earn its experts or the workload does not react enough "
                 "to dropped pairs for a policy comparison on it to mean anything\n");
  return pass ? 0 : 3;
}

}  // namespace lrmoe
