// Two hosts, one process each: two network namespaces joined by a veth pair, made by the test
// itself. The processes rendezvous over the namespaces' own addresses with torchrun's variables,
// as a multi-node launcher sets them (each host: LOCAL_RANK 0 of 1), and train to the same
// losses as one process. Where namespaces cannot be made (not root, no `ip`), the test says why
// and CTest reports it as skipped.

#include <unistd.h>

#include <catch2/catch.hpp>

#include <array>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/temp_folder.hpp"

using lrmoe_test::ChildProcess;
using lrmoe_test::kTinyExperiment;
using lrmoe_test::run_lrmoe;
using lrmoe_test::TempFolder;

namespace {

std::string ip_program() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return {};
}

// Two namespaces "lrmoe-<pid>-0" and "-1" with a veth pair between them, 10.213.<k>.1 and .2/24,
// and their loopback up; deleted (with the pair) when this object goes.
class TwoHosts {
 public:
  // The hosts, or nothing with `why` set.
  static std::optional<TwoHosts> make(const TempFolder& dir, std::string& why) {
    const std::string ip = ip_program();
    if (ip.empty()) {
      why = "no `ip` program (iproute2)";
      return std::nullopt;
    }
    TwoHosts hosts(ip, dir);
    const std::string a = hosts.names_[0], b = hosts.names_[1];
    const std::string veth_a = "lrm" + std::to_string(getpid() % 100000) + "a",
                      veth_b = "lrm" + std::to_string(getpid() % 100000) + "b";
    const std::vector<std::vector<std::string>> steps{
        {"netns", "add", a},
        {"netns", "add", b},
        {"link", "add", veth_a, "type", "veth", "peer", "name", veth_b},
        {"link", "set", veth_a, "netns", a},
        {"link", "set", veth_b, "netns", b},
        {"-n", a, "addr", "add", hosts.address(0) + "/24", "dev", veth_a},
        {"-n", b, "addr", "add", hosts.address(1) + "/24", "dev", veth_b},
        {"-n", a, "link", "set", veth_a, "up"},
        {"-n", b, "link", "set", veth_b, "up"},
        {"-n", a, "link", "set", "lo", "up"},
        {"-n", b, "link", "set", "lo", "up"},
    };
    for (const auto& step : steps) {
      std::vector<std::string> command{ip};
      command.insert(command.end(), step.begin(), step.end());
      if (!hosts.run(command, why)) return std::nullopt;
      if (step[0] == "netns") ++hosts.made_;
    }
    return hosts;
  }

  TwoHosts(TwoHosts&& other) noexcept
      : ip_(other.ip_), dir_(other.dir_), names_(other.names_), made_(other.made_) {
    other.made_ = 0;
  }
  TwoHosts& operator=(TwoHosts&&) = delete;

  ~TwoHosts() {
    std::string ignored;
    for (int i = 0; i < made_; ++i) run({ip_, "netns", "delete", names_[i]}, ignored);
  }

  std::string address(int host) const { return "10.213.7." + std::to_string(host + 1); }

  // `command` run on host `host` with the extra environment `variables` ("NAME=value").
  std::vector<std::string> on(int host, const std::vector<std::string>& variables,
                              const std::vector<std::string>& command) const {
    std::vector<std::string> full{ip_, "netns", "exec", names_[host], "/usr/bin/env"};
    full.insert(full.end(), variables.begin(), variables.end());
    full.insert(full.end(), command.begin(), command.end());
    return full;
  }

 private:
  TwoHosts(std::string ip, const TempFolder& dir)
      : ip_(std::move(ip)),
        dir_(&dir),
        names_{"lrmoe-" + std::to_string(getpid()) + "-0",
               "lrmoe-" + std::to_string(getpid()) + "-1"} {}

  bool run(const std::vector<std::string>& command, std::string& why) const {
    ChildProcess child(command, dir_->file("ip.log"));
    if (child.wait(std::chrono::seconds(20)) == 0) return true;
    why = "`";
    for (const std::string& part : command) why += part + " ";
    why.back() = '`';
    why += " failed: " + child.output();
    return false;
  }

  std::string ip_;
  const TempFolder* dir_;
  std::array<std::string, 2> names_;
  int made_ = 0;  // namespaces made, to delete
};

std::vector<double> train_losses(const std::string& db) {
  const lrmoe::QueryResult result =
      lrmoe::ResultsStore::open_read_only(db)->query("SELECT train_loss FROM steps ORDER BY step");
  std::vector<double> losses;
  for (const auto& row : result.rows) losses.push_back(std::stod(row.at(0).value()));
  return losses;
}

}  // namespace

TEST_CASE("two hosts in network namespaces, one process each, train as one process does",
          "[distributed][slow]") {
  TempFolder dir;
  std::string why;
  std::optional<TwoHosts> hosts = TwoHosts::make(dir, why);
  if (!hosts) {
    std::cout << "LRMOE-TEST-SKIPPED: cannot make two network namespaces here: " << why << "\n";
    return;
  }
  const std::vector<std::string> experiment{
      kTinyExperiment,         "--set", "cluster.ranks=2",     "--set",
      "policies.bundle=lrmoe", "--set", "train.max_steps=8",   "--set",
      "train.warmup_steps=2",  "--set", "train.target_loss=0", "--set",
      "train.threads=1"};
  auto args = [&](const std::string& db) {
    std::vector<std::string> command{LRMOE_BINARY, "run"};
    command.insert(command.end(), experiment.begin(), experiment.end());
    command.insert(command.end(), {"--db", db});
    return command;
  };

  const std::string one = dir.file("one.db");
  const std::vector<std::string> full = args(one);
  const std::vector<std::string> single(full.begin() + 1, full.end());  // without the program
  auto [single_code, single_output] = run_lrmoe(single, dir.file("one.log"));
  INFO(single_output);
  REQUIRE(single_code == 0);

  const std::string two = dir.file("two.db");
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int host = 0; host < 2; ++host) {
    const std::vector<std::string> torchrun{"RANK=" + std::to_string(host),
                                            "WORLD_SIZE=2",
                                            "LOCAL_RANK=0",
                                            "LOCAL_WORLD_SIZE=1",
                                            "MASTER_ADDR=" + hosts->address(0),
                                            "MASTER_PORT=29571"};
    ranks.push_back(std::make_unique<ChildProcess>(
        hosts->on(host, torchrun, args(host == 0 ? two : dir.file("unused.db"))),
        dir.file("host" + std::to_string(host) + ".log")));
  }
  for (auto& rank : ranks) {
    const int code = rank->wait(std::chrono::seconds(240));
    INFO(rank->output());
    REQUIRE(code == 0);
  }
  CHECK(ranks[0]->output().find("rendezvous " + hosts->address(0) + ":29571") != std::string::npos);

  const std::vector<double> expected = train_losses(one), losses = train_losses(two);
  REQUIRE(expected.size() == 8);
  REQUIRE(losses.size() == expected.size());
  for (std::size_t i = 0; i < losses.size(); ++i)
    CHECK(losses[i] == Approx(expected[i]).epsilon(1e-4));
}
