#include "runner/local_launcher.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "runner/child_status.hpp"
#include "runner/prefixed_output.hpp"
#include "runner/signal_forwarding.hpp"

namespace lrmoe {
namespace {

constexpr int kPollMilliseconds = 100;  // how late a child's end or a deadline may be noticed
constexpr double kKillDelaySeconds = 5;

std::runtime_error os_error(const std::string& what, int error = errno) {
  return std::runtime_error(fmt::format("{}: {}", what, std::strerror(error)));
}

// -- children --------------------------------------------------------------------------------

// This environment with the torchrun variables of one rank replacing any inherited ones.
std::vector<std::string> rank_environment(
    const std::vector<std::pair<std::string, std::string>>& variables) {
  std::vector<std::string> environment;
  for (char** entry = environ; *entry; ++entry) {
    const std::string_view text(*entry);
    const std::string_view name = text.substr(0, text.find('='));
    bool replaced = false;
    for (const auto& variable : variables) replaced = replaced || name == variable.first;
    if (!replaced) environment.emplace_back(text);
  }
  for (const auto& [name, value] : variables) environment.push_back(name + "=" + value);
  return environment;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (std::string& s : strings) result.push_back(s.data());
  result.push_back(nullptr);
  return result;
}

// Kills what is left in the process group of a child that has ended (and is still a zombie, so
// that the group id cannot be reused meanwhile), then reaps the child and all of it. As a child
// subreaper the launcher has adopted whatever the child started, at any depth. Returns the
// child's wait status.
int reap_group(pid_t leader) {
  kill(-leader, SIGKILL);
  int status = 0;
  while (waitpid(leader, &status, 0) < 0 && errno == EINTR) {
  }
  while (waitpid(-leader, nullptr, 0) > 0 || errno == EINTR) {
  }
  return status;
}

struct Child {
  int64_t rank = 0;
  pid_t pid = -1;
  std::string prefix;
  OutputPipe out;
  OutputPipe err;
  bool running = false;
  bool terminated = false;  // sent SIGTERM by the launcher after another rank failed
  std::string ended;        // how it ended, once it has: "exited with code 1"
};

// Starts the children and supervises them until all have ended. Each child leads its own
// process group: Ctrl-C on the terminal reaches only the launcher, which forwards it once (two
// copies would be a second Ctrl-C, which quits a run at once), and a signal to the group also
// reaches what the child started, so that nothing outlives its rank.
class Supervisor {
 public:
  Supervisor(const LocalLaunchOptions& options, SignalForwarding& signals)
      : options_(options), signals_(signals), null_input_(open("/dev/null", O_RDONLY | O_CLOEXEC)) {
    if (null_input_ < 0) throw os_error("cannot open /dev/null");
    // What a child leaves behind when it ends is adopted by the launcher rather than by init (which
    // may never reap it, in a container), so that it can be killed and reaped with the child.
    prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper_);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
  }

  // No child outlives the launcher, even when it leaves by an exception.
  ~Supervisor() {
    for (Child& child : children_) {
      if (child.running) reap_group(child.pid);
      if (child.out.fd >= 0) close(child.out.fd);
      if (child.err.fd >= 0) close(child.err.fd);
    }
    close(null_input_);
    prctl(PR_SET_CHILD_SUBREAPER, was_subreaper_);
  }
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  void start(int64_t rank, const std::string& program, std::vector<std::string> argv_strings,
             std::vector<std::string> environment_strings) {
    Child& child = children_.emplace_back();
    child.rank = rank;
    child.prefix = fmt::format("[rank {}] ", rank);
    // Close-on-exec, so that no child holds another's pipe open; the child's ends become its
    // stdout and stderr through dup2, which clears the flag. Only the launcher's ends are
    // non-blocking: a child writing faster than it is read must wait, not fail.
    int out[2] = {-1, -1};
    int err[2] = {-1, -1};
    const bool piped = pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0;
    const int pipe_error = errno;
    // the destructor closes the launcher's ends from here on
    child.out.fd = out[0];
    child.out.sink = options_.stdout_sink;
    child.err.fd = err[0];
    child.err.sink = options_.stderr_sink;
    child.err.hold_errors = true;  // a rank's "lrmoe: " error line is reported once for all
    if (!piped) {
      if (out[1] >= 0) close(out[1]);
      throw os_error("cannot create a pipe for a child's output", pipe_error);
    }
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);

    // Everything the child needs is built now: between fork and exec only async-signal-safe calls
    // are allowed, as other threads of this process may hold locks.
    std::vector<char*> argv = pointers(argv_strings);
    std::vector<char*> envp = pointers(environment_strings);
    const std::string exec_error = fmt::format("lrmoe launch: cannot execute {}: ", program);
    const pid_t parent = getpid();

    // Until the child has restored its signal dispositions, the launcher's handler must not run in
    // it.
    sigset_t forwarded;
    sigset_t previous_mask;
    sigemptyset(&forwarded);
    sigaddset(&forwarded, SIGINT);
    sigaddset(&forwarded, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &forwarded, &previous_mask);
    const pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      // If the launcher itself is killed, its ranks are asked to stop instead of running on
      // orphaned.
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(128 + SIGTERM);
      // in a background process group, reading the terminal would stop it
      dup2(null_input_, STDIN_FILENO);
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      signals_.restore();
      pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
      execve(program.c_str(), argv.data(), envp.data());
      const char* reason = strerrordesc_np(errno);
      (void)!write(STDERR_FILENO, exec_error.data(), exec_error.size());
      (void)!write(STDERR_FILENO, reason, std::strlen(reason));
      (void)!write(STDERR_FILENO, "\n", 1);
      _exit(127);
    }
    const int fork_error = errno;
    pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
    close(out[1]);
    close(err[1]);
    if (pid < 0) throw os_error(fmt::format("cannot start rank {}", rank), fork_error);
    // Also here, so that the group exists before the launcher signals it, whichever runs first.
    setpgid(pid, pid);
    child.pid = pid;
    child.running = true;
  }

  // Returns the worst exit status of the children that ended on their own or by a forwarded signal.
  int supervise() {
    const auto start = std::chrono::steady_clock::now();
    const auto seconds = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    while (any_running()) {
      wait_for_output();
      for (const int signal_number : signals_.take()) signal_all(signal_number);
      reap_ended(seconds());
      enforce_deadlines(seconds());
    }
    report_errors();
    return worst_status_;
  }

 private:
  bool any_running() const {
    for (const Child& child : children_) {
      if (child.running) return true;
    }
    return false;
  }

  void signal_all(int signal_number) {
    for (const Child& child : children_) {
      if (child.running) kill(-child.pid, signal_number);
    }
  }

  void wait_for_output() {
    std::vector<pollfd> polled{{signals_.wake_fd(), POLLIN, 0}};
    std::vector<std::pair<OutputPipe*, const Child*>> pipes;
    for (Child& child : children_) {
      for (OutputPipe* pipe : {&child.out, &child.err}) {
        if (pipe->fd < 0) continue;
        polled.push_back({pipe->fd, POLLIN, 0});
        pipes.emplace_back(pipe, &child);
      }
    }
    // timeout, or a signal (EINTR)
    if (poll(polled.data(), polled.size(), kPollMilliseconds) <= 0) return;
    for (std::size_t i = 0; i < pipes.size(); ++i) {
      if (polled[i + 1].revents != 0) read_pipe(*pipes[i].first, pipes[i].second->prefix, false);
    }
  }

  void reap_ended(double now) {
    for (Child& child : children_) {
      if (!child.running) continue;
      siginfo_t info{};  // WNOWAIT: it stays a zombie until reap_group
      if (waitid(P_PID, static_cast<id_t>(child.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
        if (errno == EINTR) continue;
        throw os_error(fmt::format("cannot wait for rank {}", child.rank));
      }
      if (info.si_pid == 0) continue;
      const int status = reap_group(child.pid);
      child.running = false;
      // Its output so far is in the pipes: print it before the line that says how it ended.
      read_pipe(child.out, child.prefix, true);
      read_pipe(child.err, child.prefix, true);
      // held open by something that escaped its group
      if (child.out.fd >= 0) close_pipe(child.out, child.prefix);
      if (child.err.fd >= 0) close_pipe(child.err, child.prefix);
      child.ended = how_it_ended(status);
      if (exit_code(status) == 0) continue;
      // A rank that said why it failed is reported with the others at the end (report_errors).
      if (child.err.held.empty()) {
        fmt::print(options_.stderr_sink, "lrmoe launch: rank {} {}\n", child.rank, child.ended);
        std::fflush(options_.stderr_sink);
      }
      if (!child.terminated) worst_status_ = std::max(worst_status_, exit_code(status));
      if (!failed_rank_) {
        failed_rank_ = child.rank;
        stop_deadline_ = now + options_.stop_timeout_seconds;
      }
    }
  }

  // Every rank of a run usually fails with the same error (a bad experiment, a lost peer): it is
  // printed once, as the one "lrmoe: " line of the command, the first failing rank's, followed by
  // one line saying how each rank that gave an error ended and whether its error was the same.
  void report_errors() const {
    const Child* first = nullptr;
    for (const Child& child : children_) {
      if (child.err.held.empty()) continue;
      if (!first || (failed_rank_ && child.rank == *failed_rank_)) first = &child;
    }
    if (!first) return;
    const std::string& error = first->err.held.front();
    std::string summary;
    for (const Child& child : children_) {
      if (child.err.held.empty()) continue;
      const std::string& own = child.err.held.front();
      summary += fmt::format("{}rank {} {}{}", summary.empty() ? "" : "; ", child.rank, child.ended,
                             &child == first ? " (the error above)"
                             : own == error  ? " (the same error)"
                                             : ": " + own.substr(own.find(' ') + 1));
    }
    fmt::print(options_.stderr_sink, "{}\nlrmoe launch: {}\n", error, summary);
    std::fflush(options_.stderr_sink);
  }

  void enforce_deadlines(double now) {
    if (failed_rank_ && !terminate_sent_ && now >= stop_deadline_) {
      terminate_sent_ = true;
      kill_deadline_ = now + kKillDelaySeconds;
      for (Child& child : children_) {
        if (!child.running) continue;
        fmt::print(options_.stderr_sink,
                   "lrmoe launch: rank {} did not stop within {:g} s after rank {} failed; "
                   "terminating it\n",
                   child.rank, options_.stop_timeout_seconds, *failed_rank_);
        std::fflush(options_.stderr_sink);
        child.terminated = true;
        kill(-child.pid, SIGTERM);
      }
    }
    if (terminate_sent_ && !kill_sent_ && now >= kill_deadline_) {
      kill_sent_ = true;
      for (Child& child : children_) {
        if (!child.running) continue;
        fmt::print(options_.stderr_sink,
                   "lrmoe launch: rank {} did not stop within {:g} s of SIGTERM; killing it\n",
                   child.rank, kKillDelaySeconds);
        std::fflush(options_.stderr_sink);
        kill(-child.pid, SIGKILL);
      }
    }
  }

  const LocalLaunchOptions& options_;
  SignalForwarding& signals_;
  const int null_input_;  // the children's stdin
  int was_subreaper_ = 0;
  std::vector<Child> children_;
  int worst_status_ = 0;
  std::optional<int64_t> failed_rank_;
  double stop_deadline_ = 0;
  double kill_deadline_ = 0;
  bool terminate_sent_ = false;
  bool kill_sent_ = false;
};

void check_options(const LocalLaunchOptions& options) {
  if (options.processes < 1) {
    throw std::runtime_error(fmt::format(
        "the number of processes to launch must be at least 1, got {}", options.processes));
  }
  if (options.master_port < 0 || options.master_port > 65535) {
    throw std::runtime_error(
        fmt::format("master port {} is out of range: use 1..65535, or 0 to pick a free one",
                    options.master_port));
  }
  if (!(options.stop_timeout_seconds >= 0)) {
    throw std::runtime_error(
        fmt::format("the stop timeout must be 0 s or more, got {}", options.stop_timeout_seconds));
  }
  if (!options.stdout_sink || !options.stderr_sink) {
    throw std::runtime_error("launch_local needs an output sink for both streams");
  }
}

}  // namespace

int64_t free_tcp_port(const std::string& address) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int error = getaddrinfo(address.c_str(), "0", &hints, &found); error != 0) {
    throw std::runtime_error(
        fmt::format("cannot resolve the master address '{}': {}", address, gai_strerror(error)));
  }
  const std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, freeaddrinfo);
  int error = 0;
  for (const addrinfo* a = found; a; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = errno;
      continue;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    const bool ok = bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
                    getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0;
    error = errno;
    close(fd);
    if (!ok) continue;
    const in_port_t port = bound.ss_family == AF_INET6
                               ? reinterpret_cast<const sockaddr_in6&>(bound).sin6_port
                               : reinterpret_cast<const sockaddr_in&>(bound).sin_port;
    return ntohs(port);
  }
  throw os_error(fmt::format("cannot find a free TCP port on the master address '{}'", address),
                 error);
}

int launch_local(const LocalLaunchOptions& options) {
  check_options(options);
  const std::string program = options.program.empty() ? self_executable() : options.program;
  const int64_t port =
      options.master_port != 0 ? options.master_port : free_tcp_port(options.master_addr);
  std::vector<std::string> argv{program};
  argv.insert(argv.end(), options.arguments.begin(), options.arguments.end());

  SignalForwarding signals;
  Supervisor supervisor(options, signals);
  for (int64_t rank = 0; rank < options.processes; ++rank) {
    const std::string world = std::to_string(options.processes);
    supervisor.start(rank, program, argv,
                     rank_environment({{"RANK", std::to_string(rank)},
                                       {"WORLD_SIZE", world},
                                       {"LOCAL_RANK", std::to_string(rank)},
                                       {"LOCAL_WORLD_SIZE", world},
                                       {"MASTER_ADDR", options.master_addr},
                                       {"MASTER_PORT", std::to_string(port)}}));
  }
  return supervisor.supervise();
}

}  // namespace lrmoe
