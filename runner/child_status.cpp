#include "runner/child_status.hpp"

#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace lrmoe {

std::string self_executable() {
  std::error_code error;
  const std::filesystem::path path = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    throw std::runtime_error(
        fmt::format("cannot find this program's path in /proc/self/exe: {}", error.message()));
  }
  return path.string();
}

std::string how_it_ended(int wait_status) {
  if (WIFEXITED(wait_status)) return fmt::format("exited with code {}", WEXITSTATUS(wait_status));
  const int signal_number = WTERMSIG(wait_status);
  const char* name = sigabbrev_np(signal_number);
  return name ? fmt::format("was killed by signal {} (SIG{})", signal_number, name)
              : fmt::format("was killed by signal {}", signal_number);
}

int exit_code(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

int run_to_end(const std::vector<std::string>& arguments) {
  std::vector<char*> argv;
  for (const std::string& a : arguments) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawnp(&pid, argv.front(), nullptr, nullptr, argv.data(), environ);
  if (error != 0)
    throw std::runtime_error(
        fmt::format("cannot start {}: {}", arguments.front(), std::strerror(error)));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return exit_code(status);
}

}  // namespace lrmoe
