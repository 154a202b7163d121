#pragma once
// `lrmoe positive-control EXP.toml [--budget SPEC] [--set ...] [--seeds N] [--jobs N] [--db
// PATH]`: does the workload reproduce a published result it should, before it judges anything
// else? SYMI's own comparison: SYMI as published (bundle `symi`, replicas by popularity) against
// fixed ownership at capacity factor 1.0, both under the same memory budget, N seeds each, as a
// resumable sweep (runner/gate_arms.hpp), at SYMI's published operating point (auxiliary loss
// 1e-5, pairs past the capacity dropped at random in both arms) or the workload's own (its
// auxiliary loss, lowest gates dropped); the table of replicas, drops and steps to target; the
// verdict by the rule of Note [Sensitivity gate]:
//   - reproduces when SYMI reaches the target in fewer steps, its reduction's 95% interval above
//     zero;
//   - does not otherwise, and such a workload is not used to judge LRMoE against SYMI.

#include <CLI/CLI.hpp>

#include <ostream>
#include <string>

#include "runner/gate_arms.hpp"

namespace lrmoe {

struct PositiveControlOptions {
  ArmCommandOptions arms;
  // The budget both arms run under: SYMI places replicas only where the budget leaves room
  // beyond one slot per owned expert (with its optimizer state on the device, none under "1.0x
  // fixed"; in host memory, as published, some).
  std::string budget = "1.2x fixed";
  // "published": SYMI's evaluation settings (Note [SYMI as published]); "workload": the
  // experiment's auxiliary loss and the lowest-gate rule, the harness's first positive control.
  std::string operating_point = "published";
};

// Registers `lrmoe positive-control` and its options, which fill `options`.
CLI::App* add_positive_control_command(CLI::App& app, PositiveControlOptions& options);

// 0 when SYMI's direction reproduces, 3 when it does not, 130 when stopped by Ctrl-C. Throws on
// user errors (the experiment, the database) and when a run failed.
int positive_control_command(const PositiveControlOptions& options, std::ostream& out);

}  // namespace lrmoe
