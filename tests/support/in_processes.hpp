#pragma once
// Runs a test body in several forked processes joined into one c10d process group (Gloo on
// 127.0.0.1), as the processes of a multi-process run are.

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include <torch/torch.h>

#include "core/distributed/collectives.hpp"
#include "support/network.hpp"

namespace lrmoe_test {

// Runs `body(collectives)` in `processes` forked processes joined into one process group;
// returns each process's exit code (0: every CHECK in it held). Bounded: a process that does
// not end within 60 s is killed.
template <typename Body>
std::vector<int> in_processes(int64_t processes, Body body) {
  const int port = lrmoe_test::free_port();
  std::vector<pid_t> children;
  for (int64_t rank = 0; rank < processes; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      int code = 1;
      try {
        alarm(60);
        torch::set_num_threads(1);
        lrmoe::LaunchEnvironment launch;
        launch.launcher = "test";
        launch.rank = rank;
        launch.world_size = processes;
        launch.master_addr = "127.0.0.1";
        launch.master_port = port;
        auto collectives = lrmoe::Collectives::connect(launch, std::chrono::seconds(20),
                                                       lrmoe::CollectiveBackend::Gloo);
        code = body(*collectives) ? 0 : 2;
      } catch (const std::exception& error) {
        std::fprintf(stderr, "process %ld: %s\n", static_cast<long>(rank), error.what());
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

}  // namespace lrmoe_test
