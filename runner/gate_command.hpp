#pragma once
// `lrmoe gate EXP.toml [--set ...] [--seeds N] [--jobs N] [--db PATH]`: the sensitivity gate.
// Does this experiment's model earn its experts, and does its workload react to what the
// policies change? Six arms on N seeds each, as resumable sweeps (runner/gate_arms.hpp): fixed
// ownership dropless; the dense model of the MoE's active width (model.moe_as_dense); the routed
// experts removed; LRMoE's selection with the random metric keeping half the backward work;
// about half of the routed pairs dropped in forward by lowest gate and as many at random (a
// capacity factor calibrated on the dropless runs' recorded loads). Then the table of steps to
// target with bootstrap intervals and break-even step costs, and the verdict (Note [Sensitivity
// gate] in docs/notes.md):
//   - passes when dropless reaches the target, takes no more steps than the dense model (no
//     interval above zero), dropping half the pairs by lowest gate costs steps with an interval
//     that excludes zero, and removing the MoE misses the target or takes at least twice the
//     steps;
//   - fails otherwise.

#include <CLI/CLI.hpp>

#include <ostream>

#include "runner/gate_arms.hpp"

namespace lrmoe {

struct GateOptions {
  ArmCommandOptions arms;
  double half = 0.5;  // the share of pairs the half arms drop
};

// Registers `lrmoe gate` and its options, which fill `options`.
CLI::App* add_gate_command(CLI::App& app, GateOptions& options);

// 0 when the experiment passes the gate, 3 when it fails it, 130 when stopped by Ctrl-C. Throws
// on user errors (the experiment, the database) and when a run failed.
int gate_command(const GateOptions& options, std::ostream& out);

}  // namespace lrmoe
