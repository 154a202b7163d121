// Reading a results database as a user does: the store's read-only query (one statement, no
// writes, errors that say why) and the runs, show and query commands that print it.

#include <catch2/catch.hpp>

#include <csignal>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "inspect_commands.hpp"
#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/store_samples.hpp"
#include "support/temp_folder.hpp"

using Catch::Matchers::Contains;
using lrmoe::ResultsStore;
using lrmoe_test::row_text;
using lrmoe_test::sample_run;
using lrmoe_test::sample_step;
using lrmoe_test::scalar;
using lrmoe_test::store_error_of;
using lrmoe_test::TempFolder;

TEST_CASE("query runs exactly one read-only statement", "[store]") {
  TempFolder dir;
  const std::string db_path = dir.file("results.db");
  auto store = ResultsStore::open(db_path);
  const int64_t run = store->begin_run(sample_run("queried"));
  store->add_step(run, sample_step(1));
  store->flush();

  SECTION("SELECT returns columns and text cells, NULL as nullopt") {
    const auto result = store->query("SELECT step, eval_loss, tokens * 2 AS doubled FROM steps");
    CHECK(result.columns == std::vector<std::string>{"step", "eval_loss", "doubled"});
    REQUIRE(result.rows.size() == 1);
    CHECK(row_text(result.rows[0]) == "1|NULL|8192");
    CHECK(scalar(*store, "SELECT x'0aff'") == "X'0AFF'");
  }

  SECTION("a trailing semicolon or comment is fine") {
    CHECK(scalar(*store, "SELECT 1;") == "1");
    CHECK(scalar(*store, "SELECT 2; -- the answer\n ;  /* done */") == "2");
  }

  SECTION("writes are refused, and nothing changes") {
    for (const char* sql : {"INSERT INTO events (run, time, level, message) VALUES (1, 't', "
                            "'info', 'x')",
                            "DROP TABLE steps", "DELETE FROM steps", "PRAGMA user_version = 9"}) {
      INFO(sql);
      CHECK_THAT(store_error_of([&] { store->query(sql); }),
                 Contains("only read-only statements") && Contains(db_path));
    }
    CHECK(scalar(*store, "SELECT count(*) FROM steps") == "1");
    CHECK(scalar(*store, "SELECT count(*) FROM events") == "0");
  }

  SECTION("several statements are refused, even read-only ones") {
    CHECK_THAT(store_error_of([&] { store->query("SELECT 1; SELECT 2"); }),
               Contains("more than one statement"));
    CHECK_THAT(store_error_of([&] { store->query("SELECT 1; DROP TABLE steps"); }),
               Contains("more than one statement"));
    CHECK(scalar(*store, "SELECT count(*) FROM steps") == "1");
  }

  SECTION("empty and wrong SQL say why") {
    CHECK_THAT(store_error_of([&] { store->query("  -- nothing\n"); }), Contains("empty"));
    CHECK_THAT(store_error_of([&] { store->query("SELECT * FROM no_such_table"); }),
               Contains("no such table: no_such_table") && Contains(db_path));
  }
}

TEST_CASE("lrmoe show says why a failed run failed: the last error it recorded",
          "[store][runner]") {
  TempFolder dir;
  const std::string db_path = dir.file("results.db");
  int64_t run = 0;
  {
    auto store = ResultsStore::open(db_path);
    run = store->begin_run(sample_run("broken"));
    store->add_step(run, sample_step(1, std::nullopt));
    store->add_event(run, "error", "a first error");
    store->add_event(run, "error", "step 2: the gradient norm is nan: training diverged");
    store->add_event(run, "info", "after the error");
    store->finish_run(run, "failed", std::nullopt);
  }
  std::ostringstream show;
  CHECK(lrmoe::run_show_command(db_path, run, show) == 0);
  CHECK_THAT(show.str(), Contains("status          failed\n  why             step 2: the gradient "
                                  "norm is nan: training diverged\n"));
}

TEST_CASE("the runs, show and query commands print a database", "[store][runner]") {
  TempFolder dir;
  const std::string db_path = dir.file("results.db");
  int64_t run = 0;
  {
    auto store = ResultsStore::open(db_path);
    run = store->begin_run(sample_run("demo"));
    for (int64_t step = 1; step <= 50; ++step) {
      store->add_step(
          run, sample_step(step, step % 10 == 0 ? std::optional(3.0 - 0.01 * step) : std::nullopt));
    }
    store->finish_run(run, "finished", lrmoe::TimeToTarget{40, 20.0, 8.0});
  }

  std::ostringstream runs, all_columns;
  CHECK(lrmoe::run_runs_command(db_path, {}, runs) == 0);
  CHECK_THAT(runs.str(), Contains("started (UTC)") && Contains("demo") && Contains("finished") &&
                             Contains("2.5000") && Contains("40") && !Contains("policies"));
  // Within 120 columns by default; every column with --wide.
  std::istringstream lines(runs.str());
  for (std::string line; std::getline(lines, line);) CHECK(line.size() <= 120);
  CHECK(lrmoe::run_runs_command(db_path, {}, all_columns, true) == 0);
  CHECK_THAT(all_columns.str(), Contains("policies") && Contains("9.5000") && Contains("20.0"));

  std::ostringstream show;
  CHECK(lrmoe::run_show_command(db_path, run, show) == 0);
  CHECK_THAT(show.str(), Contains("run " + std::to_string(run) + ": demo") &&
                             Contains("1,000,000 total, 250,000 active") &&
                             Contains("step 40, 20.0 s, 8.0 s of it in MoE layers") &&
                             Contains("min 9.5000  max 9.9900") &&
                             Contains("min 2.5000  max 2.9000") && Contains("█"));
  CHECK_THAT(show.str(), !Contains("[experiment]"));  // the TOML is left out
  CHECK_THAT(show.str(), !Contains("  why "));        // a finished run has nothing to explain

  std::ostringstream unknown;
  CHECK(lrmoe::run_show_command(db_path, run + 1, unknown) == 1);
  CHECK(unknown.str().empty());

  std::ostringstream query;
  CHECK(lrmoe::run_query_command(db_path, "SELECT count(*) AS n FROM steps", {}, query) == 0);
  CHECK(query.str() == " n\n--\n50\n(1 row)\n");

  // CSV and JSON carry every cell in full: long text, commas, quotes, line breaks, NULL and
  // numbers as numbers; the table cuts long cells unless --max-width is 0.
  const std::string awkward =
      "SELECT 'a text of more than forty characters, with \"quotes\"' || char(10) || 'and a line' "
      "AS note, NULL AS none, 7 AS n, 2.5 AS x, '007' AS code";
  std::ostringstream csv, json, table, wide;
  CHECK(lrmoe::run_query_command(db_path, awkward, {"csv", 40}, csv) == 0);
  CHECK(csv.str() ==
        "note,none,n,x,code\n"
        "\"a text of more than forty characters, with \"\"quotes\"\"\nand a line\",,7,2.5,007\n");
  CHECK(lrmoe::run_query_command(db_path, awkward, {"json", 40}, json) == 0);
  CHECK(json.str() ==
        "[\n {\"note\": \"a text of more than forty characters, with \\\"quotes\\\"\\u000aand a "
        "line\", \"none\": null, \"n\": 7, \"x\": 2.5, \"code\": \"007\"}\n]\n");
  CHECK(lrmoe::run_query_command(db_path, awkward, {"table", 40}, table) == 0);
  CHECK_THAT(table.str(), Contains("…") && !Contains("and a line"));
  CHECK(lrmoe::run_query_command(db_path, awkward, {"table", 0}, wide) == 0);
  CHECK_THAT(wide.str(), Contains("↵and a line"));
  CHECK_THROWS_WITH(lrmoe::run_query_command(db_path, awkward, {"xml", 40}, wide),
                    Contains("--format xml: use table, csv or json"));

  CHECK_THAT(store_error_of([&] { lrmoe::run_runs_command(dir.file("missing.db"), {}, runs); }),
             Contains("no such file"));
}

TEST_CASE("lrmoe runs keeps the runs every filter given holds for, the newest last N of them",
          "[store][runner]") {
  TempFolder dir;
  const std::string db_path = dir.file("results.db");
  {
    auto store = ResultsStore::open(db_path);
    for (const std::string model : {"qwen3-mini", "glm45-mini", "qwen3-mini", "qwen3-mini"}) {
      lrmoe::RunInfo info = sample_run("run-" + model);
      info.model = model;
      const int64_t run = store->begin_run(info);
      if (run != 4) store->finish_run(run, "finished", std::nullopt);
    }
  }
  auto ids = [&](const lrmoe::RunFilter& filter) {
    std::ostringstream out;
    lrmoe::run_runs_command(db_path, filter, out);
    std::string shown;
    for (const std::string id : {"1", "2", "3", "4"})
      if (out.str().find("\n " + id + "  ") != std::string::npos) shown += id;
    return shown;
  };
  lrmoe::RunFilter filter;
  CHECK(ids(filter) == "1234");
  filter.model = "qwen3-mini";
  CHECK(ids(filter) == "134");
  filter.status = "finished";
  CHECK(ids(filter) == "13");
  filter.last = 1;
  CHECK(ids(filter) == "3");
  filter.sweep = "none";
  std::ostringstream nothing;
  lrmoe::run_runs_command(db_path, filter, nothing);
  CHECK_THAT(nothing.str(), Contains("none of the 4 runs in " + db_path + " passes the filters"));
  filter = {};
  filter.status = "done";
  std::ostringstream refused;
  CHECK_THROWS_WITH(lrmoe::run_runs_command(db_path, filter, refused),
                    Contains("--status done: use one of running, finished"));
}

TEST_CASE("a query stopped by SIGTERM or Ctrl-C ends in one line and the signal's exit code",
          "[store][runner][e2e]") {
  TempFolder dir;
  const std::string db = dir.file("r.db");
  ResultsStore::open(db)->begin_run(sample_run("one"));
  for (int signal_number : {SIGTERM, SIGINT}) {
    lrmoe_test::ChildProcess query(
        {LRMOE_BINARY, "query", "--db", db,
         "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"},
        dir.file("query.log"));
    // Its handler is installed just before the statement starts; a stop requested from then on
    // ends the statement at its first poll.
    REQUIRE(query.wait_until_catching(signal_number, std::chrono::seconds(60)));
    query.signal(signal_number);
    CHECK(query.wait(std::chrono::seconds(30)) == 128 + signal_number);
    const std::string output = query.output();
    INFO(output);
    CHECK(output ==
          "lrmoe: results database '" + db + "': the query was stopped (Ctrl-C or SIGTERM)\n");
  }
}
