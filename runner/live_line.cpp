#include "runner/live_line.hpp"

#include <unistd.h>

#include <cstdio>

namespace lrmoe {

LiveLine::LiveLine() : live_(isatty(STDOUT_FILENO) != 0) {}

void LiveLine::show(const std::string& line, bool keep) {
  if (live_) {
    std::fprintf(stdout, keep ? "\r\033[2K%s\n" : "\r\033[2K%s", line.c_str());
    open_ = !keep;
  } else if (keep) {
    std::fprintf(stdout, "%s\n", line.c_str());
  }
  std::fflush(stdout);
}

void LiveLine::finish() {
  if (open_) std::fputc('\n', stdout);
  open_ = false;
}

}  // namespace lrmoe
