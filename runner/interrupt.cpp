#include "interrupt.hpp"

#include <unistd.h>
#include <csignal>

namespace lrmoe {
namespace {

volatile std::sig_atomic_t requested = 0;

void on_signal(int signal_number) {
  if (requested) _exit(128 + signal_number);
  requested = 1;
  const char message[] = "\nlrmoe: stopping after this step (Ctrl-C again to quit at once)\n";
  (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
}

}  // namespace

void install_interrupt_handler() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

bool interrupt_requested() {
  return requested != 0;
}

}  // namespace lrmoe
