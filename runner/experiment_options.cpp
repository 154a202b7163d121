#include "runner/experiment_options.hpp"

namespace lrmoe {

CLI::Option* repeatable(CLI::Option* option) {
  return option->allow_extra_args(false);
}

void add_experiment_options(CLI::App* command, ExperimentSource& source, bool file_required) {
  auto* file = command->add_option("experiment", source.file, "experiment TOML file");
  if (file_required) file->required();
  repeatable(command->add_option("--set", source.overrides,
                                 "override a field: section.key=value (repeatable)"));
}

}  // namespace lrmoe
