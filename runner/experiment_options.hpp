#pragma once
// The options every command that reads an experiment shares: the experiment file and its
// repeatable `--set section.key=value` overrides.

#include <CLI/CLI.hpp>

#include "runner/run_command.hpp"

namespace lrmoe {

// A repeatable option takes one value per occurrence, so that `--set a=b FILE` leaves FILE to
// the positional argument.
CLI::Option* repeatable(CLI::Option* option);

// The positional experiment file (required or not) and `--set`, into `source`.
void add_experiment_options(CLI::App* command, ExperimentSource& source, bool file_required);

}  // namespace lrmoe
