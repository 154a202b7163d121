#pragma once
// `lrmoe run [EXP.toml] [--set k=v]... [--db PATH]`: trains one experiment and records it;
// `lrmoe validate` checks one without training.

#include <optional>
#include <string>
#include <vector>

#include "core/config/experiment.hpp"
#include "core/plugins/policy_set.hpp"
#include "store/results_store.hpp"

namespace lrmoe {

// A run taken up again from a checkpoint (`lrmoe resume`, Note [Checkpoints]).
struct ResumePoint {
  int64_t run = 0;
  std::string checkpoint;  // the file
  // Resumed by a build other than the one that trained the run (`--allow-changed-code`): the
  // checkpoint's build and experiment hash are not checked against this build's.
  bool other_build = false;
};

struct ExperimentSource {
  std::optional<std::string> file;  // none: the embedded default experiment
  std::vector<std::string> overrides;
  std::optional<std::string> database;     // --db, overrides store.path
  std::optional<SweepCellTag> sweep_cell;  // --sweep-cell SWEEP:CELL, given by `lrmoe sweep`
  // --resume-run RUN --resume-checkpoint FILE [--resume-other-build], given by `lrmoe resume`
  std::optional<ResumePoint> resume;
};

// "SWEEP:CELL" (two ids) as a tag. Throws std::invalid_argument naming the option otherwise.
SweepCellTag parse_sweep_cell(const std::string& text);

// The command-line arguments that name `source` again for another lrmoe process: the file, if
// any, every --set and the sweep cell (not --db).
std::vector<std::string> experiment_arguments(const ExperimentSource& source);

// Loads and resolves the experiment from its file or the embedded default. Throws ConfigError.
Experiment load_experiment_source(const ExperimentSource& source);

// Where errors about `source` are placed: its file, or "<built-in default experiment>".
std::string experiment_place(const ExperimentSource& source);

// `message` with `place` in front, unless it already starts there (a value's own
// "FILE:LINE:COLUMN").
std::string located(const std::string& place, const std::string& message);

// load_policy_set for the experiment at `place`; a PluginError it throws names the place first,
// as every other error about the experiment does.
std::shared_ptr<const PolicySet> load_located_policy_set(const PoliciesConfig& policies,
                                                         const std::string& place);

// `lrmoe validate`: prints the resolved experiment, then each policy plugin with every
// parameter, as TOML comments. Loading the plugins checks their names and parameters.
int validate_command(const ExperimentSource& source);

// Returns the process exit code: 0 finished (target reached or max_steps), 130 stopped by
// Ctrl-C. Throws on user errors before the run starts.
int run_command(const ExperimentSource& source);

}  // namespace lrmoe
