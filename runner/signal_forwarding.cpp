#include "runner/signal_forwarding.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>

namespace lrmoe {
namespace {

// What the handler records: one launch runs at a time, and a handler can only reach globals.
volatile std::sig_atomic_t g_interrupts = 0;
volatile std::sig_atomic_t g_terminations = 0;
volatile std::sig_atomic_t g_wake_fd = -1;

void record_signal(int signal_number) {
  const int saved_errno = errno;
  if (signal_number == SIGINT) {
    g_interrupts = g_interrupts + 1;
  } else {
    g_terminations = g_terminations + 1;
  }
  (void)!write(g_wake_fd, "!", 1);  // wakes poll(); a full pipe already will
  errno = saved_errno;
}

}  // namespace

SignalForwarding::SignalForwarding() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error(
        fmt::format("cannot create the launcher's signal pipe: {}", std::strerror(errno)));
  }
  wake_read_ = fds[0];
  wake_write_ = fds[1];
  g_interrupts = 0;
  g_terminations = 0;
  g_wake_fd = wake_write_;
  struct sigaction record {};
  record.sa_handler = record_signal;
  sigemptyset(&record.sa_mask);
  record.sa_flags = SA_RESTART;
  struct sigaction child_default {};
  child_default.sa_handler = SIG_DFL;
  sigemptyset(&child_default.sa_mask);
  sigaction(SIGINT, &record, &previous_[0]);
  sigaction(SIGTERM, &record, &previous_[1]);
  sigaction(SIGCHLD, &child_default, &previous_[2]);
}

SignalForwarding::~SignalForwarding() {
  restore();
  g_wake_fd = -1;
  close(wake_read_);
  close(wake_write_);
}

std::vector<int> SignalForwarding::take() {
  char drain[64];
  while (read(wake_read_, drain, sizeof drain) > 0) {
  }
  std::vector<int> signals;
  for (const int interrupts = g_interrupts; forwarded_interrupts_ < interrupts;
       ++forwarded_interrupts_) {
    signals.push_back(SIGINT);
  }
  for (const int terminations = g_terminations; forwarded_terminations_ < terminations;
       ++forwarded_terminations_) {
    signals.push_back(SIGTERM);
  }
  return signals;
}

void SignalForwarding::restore() const noexcept {
  sigaction(SIGINT, &previous_[0], nullptr);
  sigaction(SIGTERM, &previous_[1], nullptr);
  sigaction(SIGCHLD, &previous_[2], nullptr);
}

}  // namespace lrmoe
