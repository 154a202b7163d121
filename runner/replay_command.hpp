#pragma once
// `lrmoe replay [EXPERIMENT] [--set K=V]... (--skew zipf:S | --loads-from RUN) [--variant V]...
// [--steps N] [--processes P] [--db PATH] [--record NAME]`: the experiment's plans at its model's
// full dimensions, without training (Note [Replay] in docs/notes.md). Per policy variant it prints
// whether every plan fits cluster.memory_per_rank, each rank's peak memory subtotal and total, the
// replicas, the pairs dropped and kept, and the modeled MoE time per step under cluster.profile.
// With
// --record NAME, each variant is a run of kind 'replay' in the database, recorded as a cell of
// the sweep NAME (its settings are the cell's values), so `lrmoe compare --sweep NAME` compares
// the variants. With --allocate, on a GPU, each variant's busiest pass is allocated for real.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/config/experiment.hpp"
#include "core/cost/cost_model.hpp"
#include "core/plugins/policy_set.hpp"
#include "runner/run_command.hpp"

namespace lrmoe {

struct ReplayOptions {
  ExperimentSource source;  // the experiment and its --set overrides, for every variant
  // A bundle name ("fixed"), or "LABEL:section.key=value,..." applied after the overrides.
  // None: the three bundles.
  std::vector<std::string> variants;
  std::optional<std::string> skew;         // "zipf:S"
  std::optional<int64_t> loads_from;       // a run of the database whose recorded loads drive it
  std::optional<std::string> loads_csv;    // core/replay/expert_load_csv.hpp
  std::optional<std::string> routing_npy;  // core/replay/routing_npy.hpp
  int64_t steps = 4;
  std::optional<std::string> record_as;  // a sweep name
  // The run's processes, each planning its own ranks' pairs on a thread of this one (Note
  // [Replay]); must divide cluster.ranks and a micro-batch's tokens.
  int64_t processes = 1;
  // Allocate the busiest rank's busiest pass on the GPU and report the allocator's peak beside
  // the model's (core/replay/allocated_timeline.hpp). Refused without a GPU.
  bool allocate = false;
};

// Registers `replay` and its options, parsed into `options`.
CLI::App* add_replay_command(CLI::App& app, ReplayOptions& options);

// One experiment resolved for replay: `settings` ("section.key=value") applied after the
// source's overrides, its model's vocabulary resolved, its policies loaded and its hardware
// profile resolved. Errors name the experiment and `label`.
struct ReplayExperiment {
  Experiment experiment;
  std::shared_ptr<const PolicySet> policies;
  HardwareProfile profile;
};
ReplayExperiment prepare_replay(const ExperimentSource& base,
                                const std::vector<std::string>& settings, const std::string& label);

// "zipf:S" as its exponent S >= 0; std::invalid_argument naming `option` otherwise.
double parse_skew(const std::string& text, const std::string& option = "--skew");

// Returns 0: a plan that does not fit is a finding, shown in the table (and recorded as a
// failed replay run with the reason).
// Throws (before any replay or write) for a bad experiment, variant, load source or database.
int replay_command(const ReplayOptions& options, std::ostream& out);

}  // namespace lrmoe
