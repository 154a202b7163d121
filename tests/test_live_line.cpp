// The live line on a terminal: kept updates stay above it as a history, the others rewrite it.
// The terminal is a pseudo-terminal standing in for stdout.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "runner/live_line.hpp"

namespace {

// What `write` prints to stdout while stdout is a pseudo-terminal.
template <typename Write>
std::string on_a_terminal(Write write) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  REQUIRE(master >= 0);
  REQUIRE(grantpt(master) == 0);
  REQUIRE(unlockpt(master) == 0);
  const int terminal = open(ptsname(master), O_RDWR | O_NOCTTY);
  REQUIRE(terminal >= 0);
  std::fflush(stdout);
  const int saved = dup(STDOUT_FILENO);
  dup2(terminal, STDOUT_FILENO);
  write();
  std::fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  close(terminal);
  std::string text;
  char buffer[4096];
  fcntl(master, F_SETFL, O_NONBLOCK);
  for (ssize_t n; (n = ::read(master, buffer, sizeof buffer)) > 0;)
    text.append(buffer, static_cast<std::size_t>(n));
  close(master);
  return text;
}

}  // namespace

TEST_CASE("on a terminal a kept update stays as a line of its own and the live line goes on below",
          "[runner]") {
  const std::string text = on_a_terminal([] {
    lrmoe::LiveLine line;
    REQUIRE(line.live());
    line.show("step 1", true);
    line.show("step 2", false);
    line.show("step 3", false);
    line.show("step 10", true);
    line.show("step 11", false);
    line.finish();
  });
  // The terminal turns "\n" into "\r\n".
  CHECK(
      text ==
      "\r\033[2Kstep 1\r\n\r\033[2Kstep 2\r\033[2Kstep 3\r\033[2Kstep 10\r\n\r\033[2Kstep 11\r\n");
}
