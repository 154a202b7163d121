#include "interrupt.hpp"

#include <unistd.h>

#include <csignal>
#include <cstring>

namespace lrmoe {
namespace {

volatile std::sig_atomic_t requested = 0;  // the signal's number
const char* notice_text = nullptr;

void on_signal(int signal_number) {
  if (requested) _exit(128 + signal_number);
  requested = signal_number;
  if (notice_text != nullptr) (void)!write(STDERR_FILENO, notice_text, std::strlen(notice_text));
}

}  // namespace

void install_interrupt_handler(const char* notice) {
  notice_text = notice;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

bool interrupt_requested() {
  return requested != 0;
}

int interrupt_signal() {
  return requested;
}

}  // namespace lrmoe
