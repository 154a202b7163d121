#include "core/distributed/launch_environment.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <thread>

#include "core/config/experiment.hpp"

namespace lrmoe {
namespace {

constexpr const char* kTorchrunHint =
    "torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; unset WORLD_SIZE for "
    "a single process";
constexpr const char* kSlurmHint =
    "srun sets SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID; unset SLURM_NTASKS for a single "
    "process";

class Variables {
 public:
  Variables(const std::function<const char*(const char*)>& variable, const char* hint)
      : variable_(variable), hint_(hint) {}

  bool has(const char* name) const { return variable_(name) != nullptr; }

  std::string text(const char* name) const {
    const char* value = variable_(name);
    if (value == nullptr || *value == '\0') {
      throw LaunchError(fmt::format("launcher environment: {} is not set; {}", name, hint_));
    }
    return value;
  }

  int64_t integer(const char* name, int64_t minimum) const {
    const std::string value = text(name);
    int64_t number = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (error != std::errc() || end != value.data() + value.size()) {
      throw LaunchError(fmt::format("launcher environment: {} is '{}', not a whole number; {}",
                                    name, value, hint_));
    }
    if (number < minimum) {
      throw LaunchError(fmt::format("launcher environment: {} is {}, it must be >= {}; {}", name,
                                    number, minimum, hint_));
    }
    return number;
  }

 private:
  const std::function<const char*(const char*)>& variable_;
  const char* hint_;
};

void check_consistent(const LaunchEnvironment& e, const char* rank_name, const char* size_name,
                      const char* hint) {
  if (e.rank >= e.world_size) {
    throw LaunchError(fmt::format(
        "launcher environment: {} is {} but {} is {}: a rank must be below the number of "
        "processes; {}",
        rank_name, e.rank, size_name, e.world_size, hint));
  }
  if (e.master_port < 1 || e.master_port > 65535) {
    throw LaunchError(
        fmt::format("launcher environment: the master port {} is not a TCP port (1-65535); {}",
                    e.master_port, hint));
  }
}

}  // namespace

LaunchEnvironment read_launch_environment(const ClusterConfig& cluster,
                                          const std::function<const char*(const char*)>& variable) {
  LaunchEnvironment e;
  const Variables torchrun(variable, kTorchrunHint);
  if (torchrun.has("WORLD_SIZE")) {
    e.launcher = "torchrun";
    e.world_size = torchrun.integer("WORLD_SIZE", 1);
    e.rank = torchrun.integer("RANK", 0);
    e.local_rank = torchrun.has("LOCAL_RANK") ? torchrun.integer("LOCAL_RANK", 0) : e.rank;
    e.local_world_size =
        torchrun.has("LOCAL_WORLD_SIZE") ? torchrun.integer("LOCAL_WORLD_SIZE", 1) : e.world_size;
    e.master_addr = torchrun.text("MASTER_ADDR");
    e.master_port = torchrun.integer("MASTER_PORT", 0);
    check_consistent(e, "RANK", "WORLD_SIZE", kTorchrunHint);
    return e;
  }
  const Variables slurm(variable, kSlurmHint);
  if (slurm.has("SLURM_NTASKS")) {
    e.launcher = "slurm";
    e.world_size = slurm.integer("SLURM_NTASKS", 1);
    e.rank = slurm.integer("SLURM_PROCID", 0);
    e.local_rank = slurm.integer("SLURM_LOCALID", 0);
    // Slurm writes "2(x3)" for three nodes of two tasks: the leading number is this node's.
    if (const char* per_node = variable("SLURM_NTASKS_PER_NODE");
        per_node && std::isdigit(*per_node)) {
      e.local_world_size = std::max<int64_t>(1, std::strtoll(per_node, nullptr, 10));
    }
    e.master_addr = slurm.has("MASTER_ADDR") ? slurm.text("MASTER_ADDR") : cluster.master_addr;
    e.master_port =
        slurm.has("MASTER_PORT") ? slurm.integer("MASTER_PORT", 0) : cluster.master_port;
    check_consistent(e, "SLURM_PROCID", "SLURM_NTASKS", kSlurmHint);
    return e;
  }
  return e;
}

void check_processes_fit(const Experiment& experiment, const LaunchEnvironment& launch) {
  const int64_t p = launch.world_size;
  const int64_t ranks = experiment.cluster.ranks;
  const int64_t batch = experiment.train.batch_size;
  if (ranks % p != 0) {
    throw LaunchError(fmt::format(
        "{} runs {} processes but cluster.ranks is {}: each process hosts cluster.ranks / "
        "processes logical ranks, so start a number of processes that divides {}",
        launch.launcher, p, ranks, ranks));
  }
  if (batch % p != 0) {
    throw LaunchError(
        fmt::format("{} runs {} processes but train.batch_size is {}: each process reads "
                    "batch_size / processes rows, so set a batch_size divisible by {}",
                    launch.launcher, p, batch, p));
  }
}

int64_t threads_per_process(int64_t requested, const LaunchEnvironment& launch) {
  if (requested != 0 || launch.local_world_size <= 1) return requested;
  return std::max<int64_t>(
      1, static_cast<int64_t>(std::thread::hardware_concurrency()) / launch.local_world_size);
}

}  // namespace lrmoe
