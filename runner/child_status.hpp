#pragma once
// What the commands that start other programs (`launch`, `sweep`, `compare --plot`) need: where
// this program is, how a child ended, and running one to its end.

#include <string>
#include <vector>

namespace lrmoe {

// This program's path (/proc/self/exe). Throws std::runtime_error when it cannot be read.
std::string self_executable();
// "exited with code 2", "was killed by signal 9 (SIGKILL)".
std::string how_it_ended(int wait_status);
// The exit code a shell would report: the child's, or 128 + S for a child killed by signal S.
int exit_code(int wait_status);
// Runs `arguments` (the program found on PATH unless it has a '/') with this process's stdout
// and stderr, and returns its exit code as exit_code() does. Throws std::runtime_error when it
// cannot be started.
int run_to_end(const std::vector<std::string>& arguments);

}  // namespace lrmoe
