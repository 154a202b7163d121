#include "store/local_process.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

namespace lrmoe::store {

std::string this_host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

int64_t this_process_id() {
  return static_cast<int64_t>(getpid());
}

bool process_is_alive(int64_t pid) {
  // kill() gives 0 and negative ids a meaning of their own (process groups), and pid_t is an
  // int: such values cannot name a process of ours.
  if (pid <= 0 || pid > INT_MAX) return false;
  // Signal 0 only checks: EPERM means the process exists but belongs to another user.
  return kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
}

}  // namespace lrmoe::store
