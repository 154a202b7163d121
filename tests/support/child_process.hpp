#pragma once
// Runs the lrmoe binary as a child process for end-to-end tests: output captured to a file,
// bounded in time, always reaped.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace lrmoe_test {

// The tiny model's experiment, which most end-to-end tests run (seconds per run).
inline const std::string kTinyExperiment =
    std::string(LRMOE_SOURCE_DIR) + "/experiments/tiny-moe.toml";

class ChildProcess {
 public:
  // Starts `args` (args[0] is the program) with stdout and stderr going to `log_path`.
  ChildProcess(const std::vector<std::string>& args, const std::string& log_path)
      : program_(args.at(0)), log_path_(log_path) {
    pid_ = fork();
    if (pid_ == 0) {
      FILE* log = std::fopen(log_path.c_str(), "w");
      if (log) {
        dup2(fileno(log), STDOUT_FILENO);
        dup2(fileno(log), STDERR_FILENO);
      }
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }

  ~ChildProcess() {
    if (!reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Exit code, or 128 + signal; kills the child and returns -1 after `timeout`.
  int wait(std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        reaped_ = true;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  void signal(int number) { kill(pid_, number); }
  pid_t pid() const { return pid_; }

  // Whether the started program (not the forked copy of the test before its exec, which has
  // the test framework's handlers) has a handler installed for signal `number`, by the SigCgt
  // mask of its /proc status: what a test waits for before sending a signal the program must
  // catch, instead of a guessed delay.
  bool catches(int number) const {
    const std::string proc = "/proc/" + std::to_string(pid_);
    std::error_code error;
    if (std::filesystem::read_symlink(proc + "/exe", error) !=
        std::filesystem::canonical(program_, error))
      return false;
    std::ifstream status(proc + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("SigCgt:", 0) == 0)
        return (std::stoull(line.substr(7), nullptr, 16) >> (number - 1)) & 1;
    }
    return false;
  }

  // Waits until catches(number), at most `timeout`; whether it does.
  bool wait_until_catching(int number, std::chrono::seconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!catches(number)) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a poll, not a guess
    }
    return true;
  }

  std::string output() const {
    std::ifstream in(log_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string program_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string log_path_;
};

// Runs to completion (bounded) and returns {exit code, output}.
inline std::pair<int, std::string> run_lrmoe(
    const std::vector<std::string>& args, const std::string& log_path,
    std::chrono::seconds timeout = std::chrono::seconds(300)) {
  std::vector<std::string> full{LRMOE_BINARY};
  full.insert(full.end(), args.begin(), args.end());
  ChildProcess child(full, log_path);
  int code = child.wait(timeout);
  return {code, child.output()};
}

}  // namespace lrmoe_test
