#include "runner/prefixed_output.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace lrmoe {
namespace {

// a longer line without newline is printed in pieces
constexpr std::size_t kMaxLineBytes = 1 << 16;

// How lrmoe's one error line of a command starts (runner/main.cpp).
constexpr std::string_view kErrorLinePrefix = "lrmoe: ";

void print_line(std::FILE* sink, std::string_view prefix, std::string_view line) {
  fmt::print(sink, "{}{}\n", prefix, line);
  std::fflush(sink);  // each line shows as soon as it is complete, even when the sink is a pipe
}

void print_or_hold(OutputPipe& pipe, std::string_view prefix, std::string_view line) {
  if (pipe.hold_errors && line.rfind(kErrorLinePrefix, 0) == 0) {
    pipe.held.emplace_back(line);
  } else {
    print_line(pipe.sink, prefix, line);
  }
}

void print_complete_lines(OutputPipe& pipe, std::string_view prefix) {
  std::size_t start = 0;
  for (std::size_t end; (end = pipe.pending.find('\n', start)) != std::string::npos;
       start = end + 1) {
    print_or_hold(pipe, prefix, std::string_view(pipe.pending).substr(start, end - start));
  }
  pipe.pending.erase(0, start);
  if (pipe.pending.size() >= kMaxLineBytes) {
    print_line(pipe.sink, prefix, pipe.pending);
    pipe.pending.clear();
  }
}

}  // namespace

void close_pipe(OutputPipe& pipe, std::string_view prefix) {
  if (!pipe.pending.empty()) print_or_hold(pipe, prefix, pipe.pending);
  pipe.pending.clear();
  close(pipe.fd);
  pipe.fd = -1;
}

void read_pipe(OutputPipe& pipe, std::string_view prefix, bool drain) {
  char buffer[65536];
  while (pipe.fd >= 0) {
    const ssize_t n = read(pipe.fd, buffer, sizeof buffer);
    if (n > 0) {
      pipe.pending.append(buffer, static_cast<std::size_t>(n));
      print_complete_lines(pipe, prefix);
      if (!drain) return;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;
    } else {
      close_pipe(pipe, prefix);
    }
  }
}

}  // namespace lrmoe
