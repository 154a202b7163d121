#include "launch_command.hpp"

#include "core/data/token_source.hpp"
#include "core/device/compute_device.hpp"
#include "core/distributed/launch_environment.hpp"
#include "core/train/process_footprint.hpp"
#include "local_launcher.hpp"

namespace lrmoe {

int launch_command(const ExperimentSource& source, int64_t processes) {
  // Every mistake the processes would each report is reported once, here.
  const Experiment experiment = load_experiment_source(source);
  LaunchEnvironment launch;
  launch.launcher = "lrmoe launch";
  launch.world_size = processes;
  check_processes_fit(experiment, launch);
  // The data too: a file that is not there would be each process's one line.
  make_token_source(experiment.data, experiment.experiment.seed, experiment.train.seq_len);
  // Before any process starts: the processes this host's memory can hold (each refuses a run
  // too large for it, but only once it has started).
  check_footprint_fits(
      process_footprint(experiment.model, experiment.train, experiment.cluster, processes),
      resolve_device(experiment.train.device, /*local_rank=*/0), processes);

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
