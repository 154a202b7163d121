// Reading torchrun's and Slurm's environment variables, with a fake environment.
#include <catch2/catch.hpp>

#include <map>

#include "core/config/experiment.hpp"
#include "core/distributed/launch_environment.hpp"

using namespace lrmoe;
using Catch::Contains;

namespace {

LaunchEnvironment read(const std::map<std::string, std::string>& variables,
                       ClusterConfig cluster = {}) {
  return read_launch_environment(cluster, [&](const char* name) -> const char* {
    const auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& variables) {
  try {
    read(variables);
  } catch (const LaunchError& error) {
    return error.what();
  }
  FAIL("no LaunchError");
  return "";
}

const std::map<std::string, std::string> kTorchrun{{"RANK", "3"},
                                                   {"WORLD_SIZE", "4"},
                                                   {"LOCAL_RANK", "1"},
                                                   {"MASTER_ADDR", "node7"},
                                                   {"MASTER_PORT", "29400"}};

}  // namespace

TEST_CASE("without a launcher the run is one process", "[launch]") {
  const LaunchEnvironment e = read({{"HOME", "/root"}});
  CHECK(e.launcher == "none");
  CHECK(e.rank == 0);
  CHECK(e.world_size == 1);
}

TEST_CASE("torchrun's variables name the rank, the world and the rendezvous", "[launch]") {
  const LaunchEnvironment e = read(kTorchrun);
  CHECK(e.launcher == "torchrun");
  CHECK(e.rank == 3);
  CHECK(e.world_size == 4);
  CHECK(e.local_rank == 1);
  CHECK(e.master_addr == "node7");
  CHECK(e.master_port == 29400);
  CHECK(e.local_world_size == 4);  // without LOCAL_WORLD_SIZE, all on this host
  auto per_host = kTorchrun;
  per_host["LOCAL_WORLD_SIZE"] = "2";
  CHECK(read(per_host).local_world_size == 2);
  // torchrun inside a Slurm allocation: torchrun's variables win.
  auto both = kTorchrun;
  both["SLURM_NTASKS"] = "16";
  both["SLURM_PROCID"] = "9";
  CHECK(read(both).rank == 3);
}

TEST_CASE("Slurm's variables, with the rendezvous from the environment or the experiment",
          "[launch]") {
  ClusterConfig cluster;
  cluster.master_addr = "head-node";
  cluster.master_port = 31000;
  std::map<std::string, std::string> slurm{
      {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}};
  LaunchEnvironment e = read(slurm, cluster);
  CHECK(e.launcher == "slurm");
  CHECK(e.rank == 5);
  CHECK(e.world_size == 8);
  CHECK(e.local_rank == 1);
  CHECK(e.master_addr == "head-node");
  CHECK(e.master_port == 31000);
  CHECK(e.local_world_size == 1);
  slurm["SLURM_NTASKS_PER_NODE"] = "4(x2)";
  CHECK(read(slurm, cluster).local_world_size == 4);
  slurm["MASTER_ADDR"] = "10.0.0.2";
  slurm["MASTER_PORT"] = "29600";
  e = read(slurm, cluster);
  CHECK(e.master_addr == "10.0.0.2");
  CHECK(e.master_port == 29600);
}

TEST_CASE("missing, malformed and inconsistent launcher variables are one-line errors",
          "[launch]") {
  auto without = [](std::string name) {
    auto variables = kTorchrun;
    variables.erase(name);
    return variables;
  };
  auto with = [](std::string name, std::string value) {
    auto variables = kTorchrun;
    variables[name] = value;
    return variables;
  };
  CHECK_THAT(
      error_of(without("MASTER_PORT")),
      Contains("launcher environment: MASTER_PORT is not set; torchrun sets RANK, WORLD_SIZE"));
  CHECK_THAT(error_of(without("RANK")), Contains("RANK is not set"));
  CHECK_THAT(error_of(with("RANK", "two")), Contains("RANK is 'two', not a whole number"));
  CHECK_THAT(error_of(with("WORLD_SIZE", "0")), Contains("WORLD_SIZE is 0, it must be >= 1"));
  CHECK_THAT(error_of(with("RANK", "4")), Contains("RANK is 4 but WORLD_SIZE is 4"));
  CHECK_THAT(error_of(with("MASTER_PORT", "70000")),
             Contains("the master port 70000 is not a TCP port"));
  CHECK_THAT(
      error_of({{"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "0"}}),
      Contains("SLURM_LOCALID is not set; srun sets SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID"));
}

TEST_CASE("an experiment must split over the launched processes", "[launch]") {
  Experiment experiment;
  experiment.cluster.ranks = 4;
  experiment.train.batch_size = 8;
  LaunchEnvironment launch = read(kTorchrun);
  CHECK_NOTHROW(check_processes_fit(experiment, launch));
  auto error_for = [&](int64_t processes) {
    launch.world_size = processes;
    try {
      check_processes_fit(experiment, launch);
    } catch (const LaunchError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_for(3),
             Contains("torchrun runs 3 processes but cluster.ranks is 4") && Contains("divides 4"));
  experiment.cluster.ranks = 8;
  experiment.train.batch_size = 6;
  CHECK_THAT(error_for(4), Contains("train.batch_size is 6") && Contains("divisible by 4"));
  CHECK(error_for(2) == "no error");
}
