// A plugin that crashes, ends the process or hangs inside a call (Note [Plugin failures]): the
// call is marked while it runs, and the real `lrmoe` program reports it as one line and records
// the run failed with that line, on one process and on two. The message of each kind of failure
// is a case of tests/cases/user_errors.toml.

#include <catch2/catch.hpp>

#include <thread>

#include "core/plugins/plugin_call_watch.hpp"
#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/temp_folder.hpp"

using lrmoe_test::kTinyExperiment;
using lrmoe_test::run_lrmoe;
using lrmoe_test::TempFolder;

namespace {

std::vector<std::string> error_lines(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("lrmoe: ", 0) == 0) lines.push_back(line);
  }
  return lines;
}

// The failing metric fixture `name` (tests/plugin_fixtures/failing_metric.cpp) on the tiny model.
std::vector<std::string> failing_metric_run(const std::string& command, const std::string& name,
                                            const std::string& db) {
  return {command, kTinyExperiment,
          "--db",  db,
          "--set", std::string("policies.plugin_path=") + LRMOE_PLUGIN_FIXTURES + "/" + name,
          "--set", "policies.metric.name=failing_metric",
          "--set", "cluster.ranks=2"};
}

// The one run of `db`: its status and its error events.
std::pair<std::string, std::vector<std::string>> recorded(const std::string& db) {
  auto store = lrmoe::ResultsStore::open_read_only(db);
  const auto runs = store->list_runs();
  REQUIRE(runs.size() == 1);
  std::vector<std::string> errors;
  for (const auto& row :
       store->query("SELECT message FROM events WHERE level = 'error' ORDER BY id").rows)
    errors.push_back(row.at(0).value_or(""));
  return {runs.front().status, errors};
}

}  // namespace

TEST_CASE("a plugin call is marked while it runs, nested calls give back the outer one",
          "[plugins]") {
  lrmoe::ActivePluginCall found;
  REQUIRE_FALSE(lrmoe::find_plugin_call(found, /*this_thread_only=*/true));
  const std::string outer_label = "the placement plugin 'p' (/p.so)";
  const std::string inner_label = "the metric plugin 'm' (/m.so)";
  {
    lrmoe::PluginCallScope outer(outer_label, "plan", {4, 2});
    REQUIRE(lrmoe::find_plugin_call(found, true));
    CHECK(std::string(found.label) == outer_label);
    CHECK(std::string(found.call) == "plan");
    CHECK(found.place.step == 4);
    CHECK(found.place.layer == 2);
    {
      lrmoe::PluginCallScope inner(inner_label, "score", {});
      REQUIRE(lrmoe::find_plugin_call(found, true));
      CHECK(std::string(found.label) == inner_label);
      CHECK(found.place.step == -1);
    }
    REQUIRE(lrmoe::find_plugin_call(found, true));
    CHECK(std::string(found.call) == "plan");
    // Another thread sees it (a crash on LibTorch's pool is the plugin's), but not as its own.
    bool seen = false;
    bool own = true;
    std::thread([&] {
      lrmoe::ActivePluginCall other;
      seen = lrmoe::find_plugin_call(other) && std::string(other.call) == "plan";
      own = lrmoe::find_plugin_call(other, true);
    }).join();
    CHECK(seen);
    CHECK_FALSE(own);
  }
  CHECK_FALSE(lrmoe::find_plugin_call(found, true));
}

TEST_CASE("a plugin that crashes mid-run is one line and an error event of its failed run",
          "[e2e][plugins]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  auto [code, output] = run_lrmoe(failing_metric_run("run", "segfaulting_metric", db),
                                  dir.file("run.log"), std::chrono::seconds(120));
  INFO(output);
  CHECK(code == 128 + SIGSEGV);
  const std::vector<std::string> lines = error_lines(output);
  REQUIRE(lines.size() == 1);
  const auto [status, errors] = recorded(db);
  CHECK(status == "failed");
  REQUIRE(errors.size() == 1);
  CHECK("lrmoe: " + errors.front() == lines.front());
}

TEST_CASE("a plugin that hangs on two processes fails the run once, recorded, within its timeout",
          "[e2e][plugins]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  std::vector<std::string> args = failing_metric_run("launch", "hanging_metric", db);
  args.insert(args.end(), {"-n", "2", "--set", "policies.call_timeout=1"});
  const auto started = std::chrono::steady_clock::now();
  auto [code, output] = run_lrmoe(args, dir.file("launch.log"), std::chrono::seconds(120));
  INFO(output);
  CHECK(code == 1);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(60));
  const std::vector<std::string> lines = error_lines(output);
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines.front(), Catch::Contains("score did not return within 1 s"));
  const auto [status, errors] = recorded(db);
  CHECK(status == "failed");
  REQUIRE_FALSE(errors.empty());
  CHECK_THAT(errors.front(), Catch::Contains("hanging_metric.so): score did not return"));
}

TEST_CASE("a plugin that crashes in one process of two is recorded in the run by that process",
          "[e2e][plugins]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  std::vector<std::string> args = failing_metric_run("launch", "rank1_segfaulting_metric", db);
  args.insert(args.end(), {"-n", "2"});
  auto [code, output] = run_lrmoe(args, dir.file("launch.log"), std::chrono::seconds(120));
  INFO(output);
  CHECK(code != 0);
  const std::vector<std::string> lines = error_lines(output);
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines.front(), Catch::Contains("rank1_segfaulting_metric.so): score crashed with "
                                            "SIGSEGV"));
  const auto [status, errors] = recorded(db);
  CHECK(status == "failed");
  REQUIRE_FALSE(errors.empty());
  // Process 1's line first: process 0 fails only after, when its peer is gone.
  CHECK("lrmoe: " + errors.front() == lines.front());
}
