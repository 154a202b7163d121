// Opening a results database: its pragmas, read-only stores, migrating an older schema, refusing
// a newer one, files that are not results databases and paths that cannot be opened (left
// untouched), and settling runs whose process is gone as interrupted.

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "store/results_store.hpp"
#include "store/schema.hpp"
#include "store/sqlite_handle.hpp"
#include "support/rank_memory_row.hpp"
#include "support/store_samples.hpp"
#include "support/temp_folder.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using lrmoe::ResultsStore;
using lrmoe_test::is_utc_timestamp;
using lrmoe_test::rank_memory_row;
using lrmoe_test::row_text;
using lrmoe_test::sample_layer_step;
using lrmoe_test::sample_run;
using lrmoe_test::sample_step;
using lrmoe_test::scalar;
using lrmoe_test::store_error_of;
using lrmoe_test::TempFolder;

namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The id of a process that has certainly exited: a child we started and reaped.
int64_t pid_of_exited_process() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  return child;
}

}  // namespace

TEST_CASE("the database uses WAL, a patient lock for writers and foreign keys", "[store]") {
  TempFolder dir;
  auto store = ResultsStore::open(dir.file("results.db"));
  {
    // WAL is a property of the file, so a second connection sees it. (The store's `query`
    // refuses PRAGMA journal_mode: SQLite counts it as a possible write.)
    lrmoe::sqlite::Database second(store->path(), lrmoe::sqlite::OpenMode::kReadOnly);
    lrmoe::sqlite::Statement journal_mode = second.prepare("PRAGMA journal_mode");
    REQUIRE(journal_mode.step());
    CHECK(journal_mode.column_text(0) == "wal");
  }
  // Readers wait 5 s for a lock; a writer waits with its own busy handler (below).
  CHECK(scalar(*ResultsStore::open_read_only(store->path()), "PRAGMA busy_timeout") == "5000");
  CHECK(scalar(*store, "PRAGMA foreign_keys") == "1");
  CHECK(scalar(*store, "PRAGMA user_version") == std::to_string(lrmoe::current_schema_version()));
  // Foreign keys are enforced: a step of a run that does not exist cannot be written.
  store->add_step(42, sample_step(1));
  CHECK_THAT(store_error_of([&] { store->flush(); }), Contains("FOREIGN KEY constraint failed"));
}

TEST_CASE("a writer waits out a lock held longer than a reader would wait, and records",
          "[store]") {
  TempFolder dir;
  auto store = ResultsStore::open(dir.file("results.db"));
  const int64_t run = store->begin_run(sample_run("waits"));
  lrmoe::sqlite::Database other(store->path(), lrmoe::sqlite::OpenMode::kReadWriteCreate);
  other.execute("BEGIN EXCLUSIVE");
  // Released after 6 s, past the 5 s a reader (and, before, a writer) would wait.
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::seconds(6));
    other.execute("COMMIT");
  });
  store->add_step(run, sample_step(1));
  CHECK_NOTHROW(store->flush());
  release.join();
  CHECK(store->steps(run).size() == 1);
}

TEST_CASE("a read-only store refuses to record runs", "[store]") {
  TempFolder dir;
  const std::string db_path = dir.file("results.db");
  ResultsStore::open(db_path);
  auto store = ResultsStore::open_read_only(db_path);
  CHECK_THAT(store_error_of([&] { store->begin_run(sample_run("nope")); }),
             Contains("opened read-only"));
}

TEST_CASE("an older database migrates to the current schema", "[store]") {
  const int old_version = GENERATE(1, 2);
  CAPTURE(old_version);
  TempFolder dir;
  const std::string db_path = dir.file("old.db");
  {
    // A genuine older file: its migrations only, then rows written by hand as it would have.
    lrmoe::sqlite::Database db(db_path, lrmoe::sqlite::OpenMode::kReadWriteCreate);
    lrmoe::store::migrate(db, old_version);
    db.execute(
        "INSERT INTO runs (id, name, status, started_at, ended_at, resolved_toml, toml_sha256, "
        "code_version, host, pid, torch_version, blas, seed, params_total, params_active, "
        "target_loss, ttt_step, ttt_step_seconds, ttt_moe_seconds) VALUES (7, 'old', "
        "'finished', '2024-01-02T03:04:05.006Z', '2024-01-02T04:00:00.000Z', '', 'ab', 'v0', "
        "'elsewhere', 1, '1.13', 'openblas', 1, 100, 50, 3.0, 2, 8.5, 2.5);"
        "INSERT INTO steps VALUES (7, 1, 5.0, NULL, 0.1, 1.0, 10, 4.0, 1.0);"
        "INSERT INTO steps VALUES (7, 2, 4.0, 2.9, 0.1, 1.0, 10, 4.5, 1.5);"
        "INSERT INTO steps VALUES (7, 3, 3.5, NULL, 0.1, 1.0, 10, 4.5, 1.5);"
        "INSERT INTO expert_load VALUES (7, 1, 0, 0, 1), (7, 1, 0, 1, 3);");
    lrmoe::sqlite::Statement version = db.prepare("PRAGMA user_version");
    REQUIRE(version.step());
    REQUIRE(version.column_int64(0) == old_version);
    lrmoe::sqlite::Statement objects =
        db.prepare("SELECT sum(type = 'table'), sum(type = 'view') FROM sqlite_schema");
    REQUIRE(objects.step());
    REQUIRE(objects.column_int64(0) == 4);  // runs, steps, expert_load, events
    REQUIRE(objects.column_int64(1) == (old_version == 1 ? 0 : 2));
  }

  SECTION("read-only, an older file answers queries and steps but asks to upgrade") {
    auto store = ResultsStore::open_read_only(db_path);
    CHECK(scalar(*store, "SELECT name FROM runs") == "old");
    const auto steps = store->steps(7);
    REQUIRE(steps.size() == 3);
    CHECK(steps[1].moe_seconds == 1.5);
    CHECK(std::isnan(steps[1].moe_modeled_seconds));  // not recorded before schema 3
    CHECK_THAT(store_error_of([&] { store->list_runs(); }),
               Contains("older schema " + std::to_string(old_version)) && Contains("upgrades it"));
  }

  SECTION("opening it for writing upgrades it, keeping its rows") {
    {
      auto store = ResultsStore::open(db_path);
      CHECK(scalar(*store, "PRAGMA user_version") ==
            std::to_string(lrmoe::current_schema_version()));
      // The new tables take rows of the old run (the destructor flushes).
      store->add_plugins(7, {{"metric", "gate", "1.0.0", "", "/p/metric.so", "bb"}});
      store->add_layer_step(7, sample_layer_step(4, 0));
      store->add_rank_memory(7, rank_memory_row(4, 0, {1, 2, 3, 4, 5, 6, 7}));
    }
    auto store = ResultsStore::open_read_only(db_path);
    const lrmoe::QueryResult summary = store->query(
        "SELECT id, ranks, policies, steps, final_train_loss, final_eval_loss, "
        "ttt_step, ttt_moe_modeled_seconds FROM run_summary");
    CHECK(summary.columns == std::vector<std::string>{"id", "ranks", "policies", "steps",
                                                      "final_train_loss", "final_eval_loss",
                                                      "ttt_step", "ttt_moe_modeled_seconds"});
    REQUIRE(summary.rows.size() == 1);
    CHECK(row_text(summary.rows[0]) == "7|1||3|3.5|2.9|2|NULL");
    CHECK(scalar(*store, "SELECT share FROM expert_load_share WHERE expert = 1") == "0.75");
    const auto runs = store->list_runs();
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].status == "finished");  // another host's run: left alone
    CHECK(runs[0].time_to_target->step_seconds == 8.5);
    CHECK(std::isnan(runs[0].time_to_target->moe_modeled_seconds));
    CHECK(runs[0].ranks == 1);
    CHECK(runs[0].policies.empty());
    CHECK(std::isnan(store->steps(7).at(0).moe_modeled_seconds));
    CHECK(scalar(*store,
                 "SELECT (SELECT count(*) FROM run_plugins) || '|' || "
                 "(SELECT pairs_routed FROM layer_summary) || '|' || "
                 "(SELECT peak_total FROM memory_peak WHERE run = 7)") == "1|100|28");
    CHECK(scalar(*store,
                 "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name "
                 "IN ('runs_by_name', 'runs_by_status', 'events_by_run')") == "3");
  }
}

TEST_CASE("a database from a newer lrmoe is refused", "[store]") {
  TempFolder dir;
  const std::string db_path = dir.file("future.db");
  const int newer = lrmoe::current_schema_version() + 1;
  {
    lrmoe::sqlite::Database db(db_path, lrmoe::sqlite::OpenMode::kReadWriteCreate);
    // A newer lrmoe's file carries lrmoe's application id (schema 10 and later).
    db.execute(
        "CREATE TABLE from_the_future (x); PRAGMA application_id = 1819438447; "
        "PRAGMA user_version = " +
        std::to_string(newer));
  }
  const std::string before = file_bytes(db_path);
  for (const std::string& message :
       {store_error_of([&] { ResultsStore::open(db_path); }),
        store_error_of([&] { ResultsStore::open_read_only(db_path); })}) {
    CHECK_THAT(message, Contains(db_path) && Contains("newer lrmoe") &&
                            Contains("schema " + std::to_string(newer)) &&
                            Contains("knows " + std::to_string(lrmoe::current_schema_version())));
  }
  CHECK(file_bytes(db_path) == before);
}

TEST_CASE("files that are not results databases are refused and left untouched", "[store]") {
  TempFolder dir;

  SECTION("a text file") {
    const std::string path = dir.file("notes.txt");
    std::ofstream(path) << "These are my notes, not a database.\n"
                        << std::string(4096, 'x') << "\n";
    const std::string before = file_bytes(path);
    for (const std::string& message :
         {store_error_of([&] { ResultsStore::open(path); }),
          store_error_of([&] { ResultsStore::open_read_only(path); })}) {
      CHECK_THAT(message, Contains(path) && Contains("file is not a database") &&
                              Contains("pass another --db path"));
    }
    CHECK(file_bytes(path) == before);
    CHECK_FALSE(fs::exists(path + "-wal"));
  }

  SECTION("another program's SQLite database") {
    const std::string path = dir.file("other.db");
    {
      lrmoe::sqlite::Database db(path, lrmoe::sqlite::OpenMode::kReadWriteCreate);
      db.execute("CREATE TABLE contacts (name TEXT)");
    }
    const std::string before = file_bytes(path);
    CHECK_THAT(store_error_of([&] { ResultsStore::open(path); }),
               Contains(path) && Contains("another program"));
    CHECK(file_bytes(path) == before);
  }

  SECTION("another program's SQLite database that has a schema version of its own") {
    const std::string path = dir.file("versioned.db");
    {
      lrmoe::sqlite::Database db(path, lrmoe::sqlite::OpenMode::kReadWriteCreate);
      db.execute("CREATE TABLE runs (lap INTEGER); PRAGMA user_version = 3");
    }
    const std::string before = file_bytes(path);
    for (const std::string& message :
         {store_error_of([&] { ResultsStore::open(path); }),
          store_error_of([&] { ResultsStore::open_read_only(path); })}) {
      CHECK_THAT(message, Contains(path) && Contains("another program") &&
                              Contains("left untouched") && Contains("--db"));
    }
    CHECK(file_bytes(path) == before);
    CHECK_FALSE(fs::exists(path + "-wal"));
  }

  SECTION("an empty file, read-only") {
    const std::string path = dir.file("empty.db");
    std::ofstream{path};
    CHECK_THAT(store_error_of([&] { ResultsStore::open_read_only(path); }),
               Contains(path) && Contains("holds no lrmoe results"));
  }
}

TEST_CASE("paths that cannot be opened are refused, naming the path", "[store]") {
  TempFolder dir;

  SECTION("a missing folder") {
    const std::string path = dir.file("missing-folder/results.db");
    CHECK_THAT(store_error_of([&] { ResultsStore::open(path); }),
               Contains(path) && Contains("unable to open") && Contains("pass another --db path"));
    CHECK_FALSE(fs::exists(dir.file("missing-folder")));
  }

  SECTION("a folder") {
    const std::string path = dir.file("a-folder");
    fs::create_directory(path);
    for (const std::string& message :
         {store_error_of([&] { ResultsStore::open(path); }),
          store_error_of([&] { ResultsStore::open_read_only(path); })}) {
      CHECK_THAT(message, Contains(path) && Contains("is a folder"));
    }
  }

  SECTION("a missing file, read-only") {
    const std::string path = dir.file("never-written.db");
    CHECK_THAT(store_error_of([&] { ResultsStore::open_read_only(path); }),
               Contains(path) && Contains("no such file"));
    CHECK_FALSE(fs::exists(path));
  }
}

TEST_CASE("opening settles runs whose process is gone as interrupted", "[store]") {
  TempFolder dir;
  const std::string db_path = dir.file("results.db");
  int64_t gone = 0, alive = 0, elsewhere = 0;
  {
    auto store = ResultsStore::open(db_path);
    lrmoe::RunInfo info = sample_run("killed");
    info.pid = pid_of_exited_process();
    gone = store->begin_run(info);
    alive = store->begin_run(sample_run("still-training"));  // this process
    info.name = "other-machine";
    info.host = "some-other-host";
    elsewhere = store->begin_run(info);
  }

  auto store = ResultsStore::open(db_path);
  const auto gone_run = store->find_run(gone);
  CHECK(gone_run->status == "interrupted");
  REQUIRE(gone_run->ended_at);
  CHECK(is_utc_timestamp(*gone_run->ended_at));
  CHECK_THAT(scalar(*store, "SELECT level || ': ' || message FROM events WHERE run = " +
                                std::to_string(gone)),
             Contains("warning: marked interrupted") && Contains("is gone"));
  CHECK(store->find_run(alive)->status == "running");
  CHECK_FALSE(store->find_run(alive)->ended_at);
  CHECK(store->find_run(elsewhere)->status == "running");
  CHECK(scalar(*store, "SELECT count(*) FROM events") == "1");
}

TEST_CASE("a run whose process id now names a later process is settled as interrupted", "[store]") {
  TempFolder dir;
  const std::string db_path = dir.file("results.db");
  int64_t run = 0;
  {
    auto store = ResultsStore::open(db_path);
    run = store->begin_run(sample_run("reused-pid"));  // this process, which is alive
    CHECK(scalar(*store, "SELECT process_start IS NOT NULL FROM runs") == "1");
  }
  {
    // As if this process had died and the kernel had given its id to another (this one).
    lrmoe::sqlite::Database db(db_path, lrmoe::sqlite::OpenMode::kReadWriteCreate);
    db.execute("UPDATE runs SET process_start = 'another-boot/12345'");
  }
  CHECK(ResultsStore::open(db_path)->find_run(run)->status == "interrupted");
}

TEST_CASE("a run whose process exited but was never reaped is settled as interrupted", "[store]") {
  TempFolder dir;
  const std::string db_path = dir.file("results.db");
  // A zombie: the child has exited; until waitpid below, its id still names it.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  REQUIRE(child > 0);
  for (int i = 0; i < 500; ++i) {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string line;
    std::getline(stat, line);
    if (line.find(") Z") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int64_t run = 0;
  {
    auto store = ResultsStore::open(db_path);
    lrmoe::RunInfo info = sample_run("orphaned");
    info.pid = child;
    run = store->begin_run(info);
  }
  CHECK(ResultsStore::open(db_path)->find_run(run)->status == "interrupted");
  waitpid(child, nullptr, 0);
}

TEST_CASE(
    "a reader shows a run whose process is gone as 'interrupted?', in queries too, without writing",
    "[store]") {
  TempFolder dir;
  const std::string db_path = dir.file("results.db");
  int64_t gone = 0, alive = 0;
  {
    auto store = ResultsStore::open(db_path);
    lrmoe::RunInfo info = sample_run("killed");
    info.pid = pid_of_exited_process();
    gone = store->begin_run(info);
    alive = store->begin_run(sample_run("still-training"));
  }
  auto reader = ResultsStore::open_read_only(db_path);
  CHECK(reader->find_run(gone)->status == "interrupted?");
  CHECK(reader->list_runs().front().status == "interrupted?");
  CHECK(reader->find_run(alive)->status == "running");
  // So does `lrmoe query`; the file still says 'running': only a writer settles it.
  CHECK(scalar(*reader, "SELECT status FROM runs WHERE id = " + std::to_string(gone)) ==
        "interrupted?");
  CHECK(scalar(*reader, "SELECT count(*) FROM runs r JOIN steps s ON s.run = r.id") == "0");
  CHECK(scalar(*reader, "SELECT status FROM main.runs WHERE id = " + std::to_string(gone)) ==
        "running");
}
