#include "store/local_process.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <fstream>
#include <sstream>

namespace lrmoe::store {
namespace {

// The kernel's id of the current boot: start ticks count from the boot.
std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

// Field `wanted` (3 or more) of /proc/PID/stat; empty when unreadable. The second field, the
// command name in parentheses, may hold spaces and parentheses itself: fields are counted from
// the last ')'.
std::string stat_field(int64_t pid, int wanted) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto name_end = stat.rfind(')');
  if (name_end == std::string::npos) return {};
  std::istringstream fields(stat.substr(name_end + 1));
  std::string field;
  for (int number = 3; number <= wanted && fields >> field; ++number) {
    if (number == wanted) return field;
  }
  return {};
}

// Field 22: the start time in clock ticks after boot.
std::string start_ticks(int64_t pid) {
  return stat_field(pid, 22);
}

// Field 3, the state: a zombie (Z) or dead (X) process has exited and only waits to be reaped,
// which an orphan's parent (a container's first process, say) may never do.
bool has_exited(int64_t pid) {
  const std::string state = stat_field(pid, 3);
  return state == "Z" || state == "X";
}

}  // namespace

std::string this_host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

int64_t this_process_id() {
  return static_cast<int64_t>(getpid());
}

std::string process_start_mark(int64_t pid) {
  const std::string boot = boot_id(), ticks = start_ticks(pid);
  if (boot.empty() || ticks.empty()) return {};
  return boot + "/" + ticks;
}

bool process_is_alive(int64_t pid, const std::string& start_mark) {
  // kill() gives 0 and negative ids a meaning of their own (process groups), and pid_t is an
  // int: such values cannot name a process of ours.
  if (pid <= 0 || pid > INT_MAX) return false;
  // Signal 0 only checks: EPERM means the process exists but belongs to another user.
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  if (has_exited(pid)) return false;
  if (start_mark.empty()) return true;
  const std::string now = process_start_mark(pid);
  // Unreadable now (no /proc): cannot tell, so alive, as without a mark.
  return now.empty() || now == start_mark;
}

}  // namespace lrmoe::store
