#pragma once
// `lrmoe project (RUN... | --sweep NAME...) [--db PATH] [--model PRESET] [--ranks N,...]
// [--tokens-per-rank T,...] [--profile NAME,...] [--samples K]`: each training run's MoE time to
// target projected at its model's full dimensions (Note [Projection at full size] in
// docs/notes.md). K of the run's steps up to its target, spread over them, are replayed from its
// recorded per-expert loads with its own policies at the full-size model, on every combination
// of ranks, tokens per rank and hardware profile; the modeled seconds per step, by part (expert
// compute, all-to-all, the plans' collectives, parameter transfers), times the steps the run
// took. Recorded in table run_projections, which `lrmoe compare` shows.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace lrmoe {

struct ProjectOptions {
  std::vector<int64_t> runs;
  std::vector<std::string> sweeps;  // the last run of each of their cells
  std::string database = "lrmoe.db";
  std::optional<std::string> model;  // default: the full size of each run's preset
  std::vector<int64_t> ranks = {16, 64};
  std::vector<int64_t> tokens_per_rank = {1024, 4096};
  std::vector<std::string> profiles = {"h100-sxm-8gpu-ib400", "h200-sxm-8gpu-ib400"};
  int64_t samples = 4;
  int64_t jobs = 1;    // projections made at once, each on a thread of its own
  bool again = false;  // remake projections the database holds already
};

// Registers `lrmoe project` and its options, which fill `options`.
CLI::App* add_project_command(CLI::App& app, ProjectOptions& options);

// Throws on user errors (the database, a run that is not a training run or has no loads, a model
// with no full size, settings the experiment refuses at a configuration) before anything is
// written. Each projection is recorded as it is made, so a grid that is stopped keeps what it
// made; one the database holds already for the same sampled steps is kept, not made again,
// unless `again`. A plan that does not fit at full size is a finding: recorded with its reason.
int project_command(const ProjectOptions& options, std::ostream& out);

}  // namespace lrmoe
