#pragma once
// Which process of a multi-process run this is, from the launcher's environment variables:
// torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, or Slurm's SLURM_PROCID,
// SLURM_NTASKS and SLURM_LOCALID (the master address and port then come from MASTER_ADDR and
// MASTER_PORT when set, else from [cluster] master_addr and master_port). Without either, the
// run is one process. torchrun's variables win when both are present, as when torchrun runs
// inside a Slurm allocation.

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "core/config/cluster_config.hpp"

namespace lrmoe {

struct Experiment;

// A missing, malformed or inconsistent launcher variable; the message names it and the fix.
class LaunchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct LaunchEnvironment {
  std::string launcher = "none";  // "torchrun", "slurm" or "none"
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  int64_t local_world_size = 1;  // processes on this host (they share its cores)
  std::string master_addr;
  int64_t master_port = 0;
};

// `variable` returns the value of an environment variable, or nullptr when it is unset (tests
// pass a fake environment; the runner passes std::getenv).
LaunchEnvironment read_launch_environment(const ClusterConfig& cluster,
                                          const std::function<const char*(const char*)>& variable);

// Throws LaunchError unless the experiment splits over the launched processes: each hosts
// cluster.ranks / P logical ranks and reads train.batch_size / P rows of every batch.
void check_processes_fit(const Experiment& experiment, const LaunchEnvironment& launch);

// The intra-op threads of one process: `requested`, or when that is 0 (one per core) this
// host's cores shared by the launch's processes on it.
int64_t threads_per_process(int64_t requested, const LaunchEnvironment& launch);

}  // namespace lrmoe
