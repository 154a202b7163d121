#include "plugin_failure_report.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "child_status.hpp"
#include "core/plugins/plugin_call_watch.hpp"

extern char** environ;

namespace lrmoe {
namespace {

// Text built without allocating, as a signal handler must: appends what fits, always
// NUL-terminated.
class FixedText {
 public:
  FixedText& add(const char* text) {
    while (text != nullptr && *text != '\0' && length_ + 1 < sizeof(text_))
      text_[length_++] = *text++;
    text_[length_] = '\0';
    return *this;
  }
  FixedText& add(int64_t number) {
    char digits[24];  // filled from the end: a sign and 19 digits at most, then the NUL
    char* first = digits + sizeof(digits) - 1;
    *first = '\0';
    uint64_t magnitude = number < 0 ? 0 - static_cast<uint64_t>(number) : number;
    do {
      *--first = static_cast<char>('0' + magnitude % 10);
      magnitude /= 10;
    } while (magnitude != 0);
    if (number < 0) *--first = '-';
    return add(first);
  }
  const char* c_str() const { return text_; }
  size_t size() const { return length_; }

 private:
  char text_[8192] = {};
  size_t length_ = 0;
};

// What the reports need, set before the first plugin call and read by the handlers: plain
// arrays, so that nothing is allocated, destroyed or locked when they run.
constexpr size_t kTextBytes = 4096;
char executable[kTextBytes];
char where_text[kTextBytes];
char database_argument[kTextBytes + 8];  // "--db=PATH"
char run_text[24];
char timeout_text[64];
std::atomic<bool> recording{false};
std::atomic<int64_t> timeout_ns{0};
// Set by the first report: a second failure while it runs (another thread's crash, the
// watchdog) waits for the first to end the process.
std::atomic<bool> reporting{false};
std::atomic<bool> installed{false};
alignas(16) char alternate_stack[1 << 16];

constexpr const char* kChooseAnother = "fix the plugin, or choose another in [policies]";

void copy_into(char* target, size_t size, const std::string& text) {
  const size_t n = std::min(text.size(), size - 1);
  std::memcpy(target, text.data(), n);
  target[n] = '\0';
}

const char* signal_text(int number) {
  switch (number) {
    case SIGSEGV:
      return "crashed with SIGSEGV (an invalid memory access)";
    case SIGBUS:
      return "crashed with SIGBUS (a bus error)";
    case SIGILL:
      return "crashed with SIGILL (an illegal instruction)";
    case SIGFPE:
      return "crashed with SIGFPE (an arithmetic error)";
    case SIGABRT:
      return "aborted (SIGABRT)";
    case SIGSYS:
      return "crashed with SIGSYS (a bad system call)";
    case SIGTRAP:
      return "stopped at SIGTRAP (a trap)";
  }
  return "crashed with a fatal signal";
}

// "<where>: step 3, MoE layer 0: <label>: score <what>; <advice>", the form of a thrown
// plugin error (core/plugins/plugin_boundary.cpp) with the step and layer of a plan error.
void compose(FixedText& message, const ActivePluginCall& call, const char* what,
             const char* advice) {
  message.add(where_text).add(": ");
  if (call.place.step >= 0) {
    message.add("step ").add(call.place.step);
    if (call.place.layer >= 0) message.add(", MoE layer ").add(call.place.layer);
    message.add(": ");
  }
  message.add(call.label).add(": ").add(call.call).add(" ").add(what).add("; ").add(advice);
}

// Records the failure by `lrmoe record-plugin-failure` in a fresh process and waits for it (30 s
// at most). Returns its exit code (3: the run is no longer running), 0 when nothing is to be
// recorded, or -1 when it could not be started or did not end in time.
int record(const FixedText& message) {
  if (!recording.load()) return 0;
  const char* arguments[] = {executable,        "record-plugin-failure",
                             database_argument, "--run",
                             run_text,          "--",
                             message.c_str(),   nullptr};
  const pid_t child = _Fork();
  if (child == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
    }
    execve(executable, const_cast<char**>(arguments), environ);
    _exit(127);
  }
  if (child < 0) return -1;
  for (int waited_ms = 0; waited_ms < 30'000; waited_ms += 10) {
    int status = 0;
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (done < 0 && errno != EINTR) return -1;
    const timespec ten_ms{0, 10'000'000};
    nanosleep(&ten_ms, nullptr);
  }
  return -1;
}

// Records, then prints the one line. Async-signal-safe.
void report(const ActivePluginCall& call, const char* what, const char* advice) {
  FixedText message;
  compose(message, call, what, advice);
  const int recorded = record(message);
  FixedText line;
  if (isatty(STDERR_FILENO)) line.add("\n");  // after a live progress line
  line.add("lrmoe: ").add(message.c_str());
  // 3: the run had ended already (another process of it recorded its own failure first).
  if (recorded != 0 && recorded != 3) {
    line.add(" (run ").add(run_text).add(
        " could not be recorded failed: lrmoe "
        "record-plugin-failure ");
    if (recorded < 0)
      line.add("did not run or end");
    else
      line.add("exited with code ").add(static_cast<int64_t>(recorded));
    line.add(")");
  }
  line.add("\n");
  for (size_t written = 0; written < line.size();) {
    const ssize_t n = write(STDERR_FILENO, line.c_str() + written, line.size() - written);
    if (n <= 0 && errno != EINTR) break;
    if (n > 0) written += static_cast<size_t>(n);
  }
}

void on_fatal_signal(int number, siginfo_t*, void*) {
  ActivePluginCall call;
  if (find_plugin_call(call)) {
    if (reporting.exchange(true)) {
      for (;;) pause();  // the first report ends the process
    }
    report(call, signal_text(number), kChooseAnother);
  }
  // Dies of the signal as it would have without this handler: a fault happens again on return,
  // a raised signal is delivered on return.
  struct sigaction standard {};
  standard.sa_handler = SIG_DFL;
  sigaction(number, &standard, nullptr);
  raise(number);
}

// exit() or quick_exit() called by plugin code on this thread: the status it gives is lost to
// the handlers, and a plugin's exit(0) must not look like a finished run.
void on_exit_in_plugin() {
  ActivePluginCall call;
  if (!find_plugin_call(call, /*this_thread_only=*/true) || reporting.exchange(true)) return;
  report(call, "ended the process (exit)", kChooseAnother);
  _exit(1);
}

void watch_for_hangs() {
  for (;;) {
    const int64_t limit = timeout_ns.load();
    const int64_t poll = std::clamp<int64_t>(limit / 4, 10'000'000, 250'000'000);
    std::this_thread::sleep_for(std::chrono::nanoseconds(poll));
    ActivePluginCall call;
    if (!find_plugin_call(call) || monotonic_nanoseconds() - call.started_ns < limit) continue;
    if (reporting.exchange(true)) return;
    FixedText what;
    what.add("did not return within ").add(timeout_text).add(" s (policies.call_timeout)");
    report(call, what.c_str(), "fix the plugin, or raise policies.call_timeout");
    _exit(1);
  }
}

void install() {
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof(alternate_stack);
  sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_sigaction = on_fatal_signal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int number : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP})
    sigaction(number, &action, nullptr);
  std::atexit(on_exit_in_plugin);
  std::at_quick_exit(on_exit_in_plugin);
  std::thread(watch_for_hangs).detach();
}

}  // namespace

void watch_plugin_failures(const std::string& where, double call_timeout_seconds) {
  timeout_ns.store(static_cast<int64_t>(call_timeout_seconds * 1e9));
  copy_into(timeout_text, sizeof(timeout_text), fmt::format("{:g}", call_timeout_seconds));
  if (installed.exchange(true)) return;
  copy_into(where_text, sizeof(where_text), where);
  copy_into(executable, sizeof(executable), self_executable());
  install();
}

void record_plugin_failures_in(const std::string& database, int64_t run) {
  copy_into(database_argument, sizeof(database_argument), "--db=" + database);
  copy_into(run_text, sizeof(run_text), std::to_string(run));
  recording.store(true);
}

}  // namespace lrmoe
