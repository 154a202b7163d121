#pragma once
// Signals sent to `lrmoe launch` while its ranks run (Ctrl-C, SIGTERM): recorded instead of
// stopping the launcher, so that its supervisor can forward each one to every rank and still reap
// them all. Kept apart from the supervisor because a signal handler can only reach globals, and
// those globals belong with the handler and the class that installs and restores it.

#include <signal.h>

#include <vector>

namespace lrmoe {

// While children run, SIGINT and SIGTERM do not stop the launcher: they are recorded, wake its
// poll() through a self-pipe, and are forwarded. SIGCHLD is set to its default so that exit
// statuses are kept for waitpid even if the caller ignores it. Everything is restored at the end.
class SignalForwarding {
 public:
  SignalForwarding();
  ~SignalForwarding();
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

  int wake_fd() const { return wake_read_; }

  // The signals received since the last call, one entry per delivery: a second Ctrl-C is
  // forwarded again, so that children can quit at once on it.
  std::vector<int> take();

  // Gives back the dispositions from before the launch; also used in a child before exec, so that
  // it starts as it would have without the launcher.
  void restore() const noexcept;

 private:
  int wake_read_ = -1;
  int wake_write_ = -1;
  struct sigaction previous_[3]{};
  int forwarded_interrupts_ = 0;
  int forwarded_terminations_ = 0;
};

}  // namespace lrmoe
