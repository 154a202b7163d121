#pragma once
// What the programs that start lrmoe children (`launch`, `sweep`) need to know of them: where
// this program is, and how a child ended.

#include <string>

namespace lrmoe {

// This program's path (/proc/self/exe). Throws std::runtime_error when it cannot be read.
std::string self_executable();
// "exited with code 2", "was killed by signal 9 (SIGKILL)".
std::string how_it_ended(int wait_status);
// The exit code a shell would report: the child's, or 128 + S for a child killed by signal S.
int exit_code(int wait_status);

}  // namespace lrmoe
