#pragma once
// `lrmoe gate EXP.toml [--set ...] [--seeds N] [--jobs N] [--db PATH]`: the sensitivity gate.
// Does this experiment's workload react to what the policies change? Fixed ownership trains it
// dropless, with about half of the routed pairs dropped in forward (a capacity factor calibrated
// on the dropless runs' recorded loads), and with every pair dropped (the routed experts
// removed), on N seeds each, as resumable sweeps; then the table of steps to target with
// bootstrap intervals, and the verdict (Note [Sensitivity gate] in docs/notes.md):
//   - passes when dropping half the pairs costs steps with an interval that excludes zero, and
//     removing the MoE misses the target or takes at least twice the steps;
//   - fails otherwise, or when dropless training does not reach the target.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace lrmoe {

struct GateOptions {
  std::string file;  // the experiment
  std::vector<std::string> overrides;
  int64_t seeds = 3;
  int64_t jobs = 1;
  std::optional<std::string> database;  // default: the experiment's store.path
  double half = 0.5;                    // the fraction of pairs the middle arm drops
};

// Registers `lrmoe gate` and its options, which fill `options`.
CLI::App* add_gate_command(CLI::App& app, GateOptions& options);

// 0 when the experiment passes the gate, 3 when it fails it, 130 when stopped by Ctrl-C. Throws
// on user errors (the experiment, the database) and when a run failed.
int gate_command(const GateOptions& options, std::ostream& out);

}  // namespace lrmoe
