#include "runner/child_status.hpp"

#include <fmt/format.h>
#include <sys/wait.h>

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

}  // namespace lrmoe
