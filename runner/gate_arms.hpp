#pragma once
// The arms of `lrmoe gate` and `lrmoe positive-control`: each arm is one variant of a resumable
// sweep over seeds 1..N, found again in the database by its settings, and summarised as steps to
// target over its seeds beside what it dropped, kept and replicated (Note [Sensitivity gate]).

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/results_store.hpp"

namespace lrmoe {

// One arm: the settings (key, TOML value) that make it, on top of the experiment and the
// user's --set. Every arm names its four plugins, so that the experiment's own cannot change it.
struct GateArm {
  std::string label;  // as the tables show it
  std::vector<std::pair<std::string, std::string>> settings;
  std::string forward;  // what its forward computes, as the gate's table shows it
};

// Fixed ownership (the plugins of the bundle `fixed`) with `settings` besides; `forward` says
// what its forward computes.
GateArm fixed_ownership_arm(std::string label, std::string forward,
                            std::vector<std::pair<std::string, std::string>> settings);

// What every command that trains arms takes: the experiment, --set, --seeds, --jobs, --db.
struct ArmCommandOptions {
  std::string file;  // the experiment
  std::vector<std::string> overrides;
  int64_t seeds = 5;
  int64_t jobs = 1;
  std::optional<std::string> database;  // default: the experiment's store.path
};

// Registers those options on `command`.
void add_arm_command_options(CLI::App& command, ArmCommandOptions& options);

// Where and how the arms' sweeps run.
struct ArmSweeps {
  std::string experiment;              // the experiment file
  std::vector<std::string> overrides;  // the user's --set, before every arm's settings
  int64_t seeds = 5;                   // each arm runs seeds 1..seeds
  int64_t jobs = 1;
  std::string database;
  std::filesystem::path folder;  // where the sweep files are written
};

// The sweeps of `options` into `database` (the experiment's store.path unless --db), their files
// in DATABASE-sweeps/ beside it.
ArmSweeps arm_sweeps(const ArmCommandOptions& options, const std::string& database);

// Writes sweep `name` (every arm x seeds 1..N) and runs what of it has not finished. False when
// Ctrl-C stopped it.
bool run_arms(const ArmSweeps& sweeps, const std::string& name, const std::vector<GateArm>& arms);

// An arm's finished runs, one per seed, and what they did.
struct ArmFigures {
  std::vector<int64_t> runs;
  std::vector<double> steps;    // to target, in seed order; +infinity where a seed missed it
  std::vector<double> modeled;  // modeled MoE seconds to target; likewise
  double dropped = 0;           // share of the routed pairs dropped in forward, over every run
  double kept = 0;              // share of the routed pairs whose backward work was kept
  double replicas = 0;          // replica instances per MoE layer and step, mean over the runs
  bool routed = false;          // whether its model routed any pair (a dense model routes none)
};

// Each arm's figures, in the order of `arms`, from the last finished run of each seed 1..N of
// sweep `name`. Throws, naming the command that finishes them, when a seed has none.
std::vector<ArmFigures> arm_figures(const ResultsStore& store, const ArmSweeps& sweeps,
                                    const std::string& name, const std::vector<GateArm>& arms);

// "median [least, most]" of steps to target, with how many seeds missed.
std::string steps_text(const std::vector<double>& steps);

// The extra steps `arm` takes over `baseline` as "+12% [+3%, +20%]" (1 - median ratio, negated,
// with its percentile bootstrap interval), or why there is no figure.
std::string extra_steps_text(const std::vector<double>& arm, const std::vector<double>& baseline);

// The break-even per-step cost of `arm` against `baseline`: the share of the baseline's step
// time at which the arm's step would reach the target as soon, given the steps each takes,
// median(baseline) / median(arm), with the bootstrap interval: "0.88 [0.80, 0.97]". An arm that
// drops pairs must step this much cheaper to gain anything in time.
std::string break_even_text(const std::vector<double>& arm, const std::vector<double>& baseline);

// Whether `arm` takes more steps than `baseline` with a 95% interval that excludes zero (an arm
// whose median missed the target does, when the baseline's median reached it).
bool costs_steps(const std::vector<double>& arm, const std::vector<double>& baseline);

}  // namespace lrmoe
