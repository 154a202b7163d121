#pragma once
// `lrmoe launch -n P`: starts P copies of a program on this machine as the ranks of one
// distributed run, the way torchrun does, and supervises them: their output is prefixed with
// their rank, Ctrl-C and SIGTERM reach them, and one failing rank stops the others.

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace lrmoe {

struct LocalLaunchOptions {
  int64_t processes = 1;  // P children
  std::string program;    // executable to start (no PATH search); empty: this program
  std::vector<std::string>
      arguments;  // argv[1..] of each child, e.g. {"run", "exp.toml", "--set", "a.b=1"}
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 0;  // 0: pick a free TCP port on master_addr
  // after one child fails, how long the others get to stop on their own
  double stop_timeout_seconds = 30;
  std::FILE* stdout_sink = stdout;  // where the children's stdout lines go
  std::FILE* stderr_sink = stderr;  // where their stderr lines and the launcher's own messages go
};

// Starts `processes` children with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) added to this environment, prefixes each line they
// print with "[rank k] " (stdout lines to stdout_sink, stderr lines to stderr_sink), forwards
// SIGINT and SIGTERM to them, and returns the worst exit status (a child killed by signal S counts
// as 128+S). When a child fails (non-zero exit or killed), it prints one line naming the rank and
// how it ended (for children that printed an error line "lrmoe: ...", at the end: the first
// failing child's error line once, then one line for all of them, so that P ranks failing alike
// give one error, not P), gives the others stop_timeout_seconds to end on their own, then sends
// SIGTERM, and
// SIGKILL 5 s later; the status of a child ended that way is not counted, as it only reflects the
// launcher's signal. Every child is always reaped, and so is anything it started that is left in
// its process group when it ends. Throws std::runtime_error when the children cannot be started.
int launch_local(const LocalLaunchOptions& options);

// A TCP port that was free on `address` a moment ago (bind to port 0 and read it back).
// Throws std::runtime_error when the address does not resolve or nothing can be bound on it.
int64_t free_tcp_port(const std::string& address);

}  // namespace lrmoe
