#include "runner/live_line.hpp"

#include <unistd.h>

#include <cstdio>

namespace lrmoe {

LiveLine::LiveLine() : live_(isatty(STDOUT_FILENO) != 0) {}

void LiveLine::show(const std::string& line, bool keep) {
  if (live_) {
    std::fprintf(stdout, "\r\033[2K%s", line.c_str());
    open_ = true;
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
