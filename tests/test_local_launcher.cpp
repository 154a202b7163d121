// The local launcher behind `lrmoe launch`, with /bin/sh children so that no lrmoe binary is
// needed. Every child that sleeps is ended by the launcher, so that no test can hang.
#include <fmt/format.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>

#include "local_launcher.hpp"

using namespace lrmoe;
using Catch::Contains;

namespace {

// A tmpfile() that the launcher writes into and the test reads back.
class Capture {
 public:
  Capture() : file_(std::tmpfile()) { REQUIRE(file_ != nullptr); }
  ~Capture() { std::fclose(file_); }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
  std::FILE* file() const { return file_; }
  std::string text() const {
    std::fflush(file_);
    std::rewind(file_);
    std::string text;
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, file_)) > 0;)
      text.append(buffer, n);
    return text;
  }

 private:
  std::FILE* file_;
};

struct Launched {
  int status = -1;
  std::string out;
  std::string err;
  double seconds = 0;
};

Launched launch_shell(int64_t processes, const std::string& script,
                      double stop_timeout_seconds = 30) {
  LocalLaunchOptions options;
  options.processes = processes;
  options.program = "/bin/sh";
  options.arguments = {"-c", script};
  options.stop_timeout_seconds = stop_timeout_seconds;
  Capture out;
  Capture err;
  options.stdout_sink = out.file();
  options.stderr_sink = err.file();
  const auto start = std::chrono::steady_clock::now();
  Launched launched;
  launched.status = launch_local(options);
  launched.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  launched.out = out.text();
  launched.err = err.text();
  return launched;
}

// The number a rank printed on the line after `prefix`, e.g. the pid of a process it started.
long printed_number(const std::string& output, const std::string& prefix) {
  const std::size_t at = output.find(prefix);
  REQUIRE(at != std::string::npos);
  return std::stol(output.substr(at + prefix.size()));
}

// Whether a process is gone, zombie included: the launcher has reaped everything its ranks started.
bool gone(long pid) {
  return !std::filesystem::exists("/proc/" + std::to_string(pid));
}

}  // namespace

TEST_CASE("launch: each child gets torchrun's variables and the worst exit status is returned",
          "[launch]") {
  setenv("WORLD_SIZE", "99", 1);  // inherited launcher variables are replaced, others kept
  setenv("LRMOE_LAUNCH_TEST_VARIABLE", "kept", 1);
  const Launched l = launch_shell(
      3,
      "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT "
      "$LRMOE_LAUNCH_TEST_VARIABLE\"; exit $RANK");
  unsetenv("WORLD_SIZE");
  unsetenv("LRMOE_LAUNCH_TEST_VARIABLE");
  CHECK(l.status == 2);
  const long port = printed_number(l.out, "[rank 0] 0 3 0 3 127.0.0.1 ");
  CHECK(port >= 1);
  CHECK(port <= 65535);
  for (int rank : {1, 2}) {
    CHECK_THAT(l.out,
               Contains(fmt::format("[rank {0}] {0} 3 {0} 3 127.0.0.1 {1} kept\n", rank, port)));
  }
  CHECK_THAT(l.err, Contains("lrmoe launch: rank 1 exited with code 1\n"));
  CHECK_THAT(l.err, Contains("lrmoe launch: rank 2 exited with code 2\n"));
  CHECK_THAT(l.err, !Contains("rank 0 exited"));
}

TEST_CASE("launch: a given master port is passed as is", "[launch]") {
  LocalLaunchOptions options;
  options.program = "/bin/sh";
  options.arguments = {"-c", "test \"$MASTER_ADDR:$MASTER_PORT\" = localhost:29517"};
  options.master_addr = "localhost";
  options.master_port = 29517;
  CHECK(launch_local(options) == 0);
}

TEST_CASE("launch: without a program the launcher starts its own executable", "[launch]") {
  LocalLaunchOptions options;
  options.arguments = {"--help"};  // this test program's, which prints and exits at once
  Capture out;
  options.stdout_sink = out.file();
  CHECK(launch_local(options) == 0);
  CHECK_THAT(out.text(), Contains("[rank 0] Catch v2"));
}

TEST_CASE("launch: every line is printed whole with its rank's prefix, on the stream it came from",
          "[launch]") {
  const Launched one =
      launch_shell(1, "printf 'one\\ntwo\\n'; printf 'problem\\n' >&2; printf 'no newline'");
  CHECK(one.status == 0);
  CHECK(one.out == "[rank 0] one\n[rank 0] two\n[rank 0] no newline\n");
  CHECK(one.err == "[rank 0] problem\n");

  // Two ranks printing many lines at once: no line is cut or mixed with another.
  const Launched two =
      launch_shell(2, "i=0; while [ $i -lt 2000 ]; do echo \"line $RANK $i\"; i=$((i+1)); done");
  CHECK(two.status == 0);
  std::istringstream lines(two.out);
  int counts[2] = {0, 0};
  bool all_whole = true;
  for (std::string line; std::getline(lines, line);) {
    const int rank = line.rfind("[rank 0] line 0 ", 0) == 0   ? 0
                     : line.rfind("[rank 1] line 1 ", 0) == 0 ? 1
                                                              : -1;
    if (rank < 0) {
      all_whole = false;
      continue;
    }
    all_whole = all_whole && std::stoi(line.substr(16)) == counts[rank];  // in order, none missing
    ++counts[rank];
  }
  CHECK(all_whole);
  CHECK(counts[0] == 2000);
  CHECK(counts[1] == 2000);
}

TEST_CASE("launch: a rank killed by SIGKILL stops the others after the stop timeout", "[launch]") {
  // Rank 0 leaves a sleep behind in its process group: the launcher must neither leave it running
  // nor leave its zombie to an init that may never reap it.
  const Launched l =
      launch_shell(2,
                   "if [ $RANK = 0 ]; then sleep 60 & echo \"sleeper $!\"; kill -9 $$; "
                   "else sleep 60; fi",
                   1);
  CHECK(l.status == 137);
  CHECK(l.seconds < 20);
  CHECK_THAT(l.err, Contains("lrmoe launch: rank 0 was killed by signal 9 (SIGKILL)\n"));
  CHECK_THAT(
      l.err,
      Contains(
          "lrmoe launch: rank 1 did not stop within 1 s after rank 0 failed; terminating it\n"));
  CHECK(gone(printed_number(l.out, "[rank 0] sleeper ")));
}

TEST_CASE("launch: a rank that ignores SIGTERM is killed 5 s later and reaped", "[launch]") {
  const Launched l = launch_shell(2,
                                  "if [ $RANK = 0 ]; then exit 3; fi; "
                                  "trap '' TERM; sleep 60 & echo \"sleeper $!\"; wait",
                                  0.5);
  // Rank 1's SIGKILL is the launcher's doing, not a failure of its own: rank 0's status counts.
  CHECK(l.status == 3);
  CHECK(l.seconds >= 5);
  CHECK(l.seconds < 20);
  CHECK_THAT(
      l.err,
      Contains(
          "lrmoe launch: rank 1 did not stop within 0.5 s after rank 0 failed; terminating it\n"));
  CHECK_THAT(l.err,
             Contains("lrmoe launch: rank 1 did not stop within 5 s of SIGTERM; killing it\n"));
  CHECK(gone(printed_number(l.out, "[rank 1] sleeper ")));
}

TEST_CASE("launch: Ctrl-C is forwarded to every rank and the handlers are restored", "[launch]") {
  const std::filesystem::path ready =
      std::filesystem::temp_directory_path() / fmt::format("lrmoe_launch_{}", getpid());
  std::filesystem::create_directories(ready);
  struct sigaction before {};
  sigaction(SIGINT, nullptr, &before);

  // Once both ranks are up, the launcher's handler is installed: interrupt this process.
  std::thread interrupter([&] {
    for (int attempt = 0; attempt < 200; ++attempt) {
      if (std::filesystem::exists(ready / "0") && std::filesystem::exists(ready / "1")) {
        kill(getpid(), SIGINT);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const Launched l =
      launch_shell(2,
                   fmt::format("trap 'echo interrupted; exit 7' INT; touch {}/$RANK; "
                               "i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done",
                               ready.string()),
                   5);
  interrupter.join();
  std::filesystem::remove_all(ready);

  CHECK(l.status == 7);
  CHECK_THAT(l.out, Contains("[rank 0] interrupted\n"));
  CHECK_THAT(l.out, Contains("[rank 1] interrupted\n"));
  struct sigaction after {};
  sigaction(SIGINT, nullptr, &after);
  CHECK(after.sa_handler == before.sa_handler);
}

TEST_CASE("launch: a program that cannot be executed ends its ranks with 127 and says why",
          "[launch]") {
  LocalLaunchOptions options;
  options.processes = 2;
  options.program = "/nonexistent/prog";
  Capture out;
  Capture err;
  options.stdout_sink = out.file();
  options.stderr_sink = err.file();
  CHECK(launch_local(options) == 127);
  const std::string text = err.text();
  CHECK_THAT(
      text,
      Contains(
          "[rank 0] lrmoe launch: cannot execute /nonexistent/prog: No such file or directory\n"));
  CHECK_THAT(
      text,
      Contains(
          "[rank 1] lrmoe launch: cannot execute /nonexistent/prog: No such file or directory\n"));
  CHECK_THAT(text, Contains("lrmoe launch: rank 0 exited with code 127\n"));
}

TEST_CASE("launch: wrong options are refused before anything starts", "[launch]") {
  LocalLaunchOptions options;
  options.program = "/bin/true";
  options.processes = 0;
  CHECK_THROWS_WITH(launch_local(options), Contains("at least 1, got 0"));
  options.processes = 1;
  options.master_port = 70000;
  CHECK_THROWS_WITH(launch_local(options), Contains("master port 70000 is out of range"));
  options.master_port = 0;
  options.stop_timeout_seconds = -1;
  CHECK_THROWS_WITH(launch_local(options), Contains("stop timeout"));
}

TEST_CASE("launch: free_tcp_port returns a port that can be used", "[launch]") {
  const int64_t port = free_tcp_port("127.0.0.1");
  CHECK(port >= 1);
  CHECK(port <= 65535);
}
