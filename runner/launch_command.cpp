#include "launch_command.hpp"

#include "core/distributed/launch_environment.hpp"
#include "local_launcher.hpp"

namespace lrmoe {

int launch_command(const ExperimentSource& source, int64_t processes) {
  // Every mistake the processes would each report is reported once, here.
  const Experiment experiment = load_experiment_source(source);
  LaunchEnvironment launch;
  launch.launcher = "lrmoe launch";
  launch.world_size = processes;
  check_processes_fit(experiment, launch);

  LocalLaunchOptions options;
  options.processes = processes;
  options.arguments = {"run"};
  const std::vector<std::string> named = experiment_arguments(source);
  options.arguments.insert(options.arguments.end(), named.begin(), named.end());
  if (source.database)
    options.arguments.insert(options.arguments.end(), {"--db", *source.database});
  options.master_addr = "127.0.0.1";
  options.master_port = 0;  // a free one: several launches may run side by side
  // The survivors notice a dead or hung peer within cluster.timeout and record the failure;
  // only then are they stopped.
  options.stop_timeout_seconds = experiment.cluster.timeout + 5;
  return launch_local(options);
}

}  // namespace lrmoe
