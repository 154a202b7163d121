#pragma once
// The output of `lrmoe launch`'s ranks: each child's stdout and stderr come through a pipe, and
// are printed line by line with the rank's prefix ("[rank k] "), each line whole, so that the
// lines of ranks writing at the same time do not mix. Kept apart from the supervisor, which only
// decides when a pipe is read or closed.

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace lrmoe {

// One of a child's output pipes, cut into lines that are printed whole with the rank's prefix.
struct OutputPipe {
  int fd = -1;
  std::FILE* sink = nullptr;
  std::string pending;  // the start of a line whose newline has not come yet
  // Lines starting "lrmoe: " (a rank's error line) are kept in `held` instead of printed, so that
  // the launcher can report one error for all ranks.
  bool hold_errors = false;
  std::vector<std::string> held;
};

// Prints what is left of an unfinished line, then closes the pipe (fd becomes -1).
void close_pipe(OutputPipe& pipe, std::string_view prefix);

// Reads what the pipe holds: once, or until it is empty (`drain`, for a child that has ended).
// Closes it at end of file.
void read_pipe(OutputPipe& pipe, std::string_view prefix, bool drain);

}  // namespace lrmoe
