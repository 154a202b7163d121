// The results store: round trips, batching, pragmas, migrations, the summary views, refusing
// files that are not ours, settling interrupted runs, and the read-only query.

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>

#include "inspect_commands.hpp"
#include "sparkline.hpp"
#include "store/local_process.hpp"
#include "store/results_store.hpp"
#include "store/schema.hpp"
#include "store/sqlite_handle.hpp"
#include "support/rank_memory_row.hpp"
#include "support/temp_folder.hpp"
#include "text_table.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using lrmoe::ResultsStore;
using lrmoe::StoreError;
using lrmoe_test::rank_memory_row;
using lrmoe_test::TempFolder;

namespace {

lrmoe::RunInfo sample_run(const std::string& name) {
  lrmoe::RunInfo info;
  info.name = name;
  info.resolved_toml = "[experiment]\nname = \"" + name + "\"\n";
  info.toml_sha256 = "3f1c";
  info.code_version = "v0.1.0-test";
  info.torch_version = "1.13.1";
  info.blas = "openblas";
  info.seed = 0xFEDCBA9876543210ULL;  // above INT64_MAX: checks the bit-pattern round trip
  info.params_total = 1'000'000;
  info.params_active = 250'000;
  info.ranks = 4;
  info.policies = "fixed_ownership/gate/keep_all/owner";
  info.target_loss = 2.5;
  return info;
}

lrmoe::StepRecord sample_step(int64_t step, std::optional<double> eval_loss = std::nullopt) {
  lrmoe::StepRecord record;
  record.step = step;
  record.train_loss = 10.0 - 0.01 * static_cast<double>(step);
  record.eval_loss = eval_loss;
  record.lr = 3e-4;
  record.grad_norm = 1.25;
  record.tokens = 4096;
  record.step_seconds = 0.5;
  record.moe_seconds = 0.2;
  record.moe_modeled_seconds = 0.0625;
  return record;
}

// Every field differs from the others, so that two swapped columns show.
lrmoe::LayerStepRecord sample_layer_step(int64_t step, int64_t layer) {
  lrmoe::LayerStepRecord record;
  record.step = step;
  record.layer = layer;
  record.pairs_routed = 100;
  record.pairs_dropped = 3;
  record.pairs_kept = 90;
  record.replicas = 2;
  record.forward_load_max = 40;
  record.forward_load_mean = 24.25;
  record.backward_load_max = 30;
  record.backward_load_mean = 22.5;
  record.bytes_forward_dispatch = 1001;
  record.bytes_forward_combine = 1002;
  record.bytes_backward_dispatch = 1003;
  record.bytes_backward_return = 1004;
  record.bytes_replica_sync = 1005;
  record.forward_seconds = 0.5;
  record.backward_seconds = 0.75;
  record.modeled_seconds = 0.375;
  record.placement_seconds = 0.0625;
  record.measured_exchange_bytes = 2048;
  record.measured_exchange_seconds = 0.5;
  record.metric_seconds = 0.03125;
  record.selection_seconds = 0.015625;
  record.routing_seconds = 0.125;
  record.compaction_seconds = 0.25;
  return record;
}

// The one cell of a one-row, one-column query.
std::string scalar(const ResultsStore& store, const std::string& sql) {
  const lrmoe::QueryResult result = store.query(sql);
  REQUIRE(result.rows.size() == 1);
  REQUIRE(result.rows[0].size() == 1);
  REQUIRE(result.rows[0][0].has_value());
  return *result.rows[0][0];
}

// A query row as "a|NULL|c". (Catch cannot print a vector of optionals: LibTorch's glog brings
// an operator<< for vectors that does not compile for them.)
std::string row_text(const std::vector<std::optional<std::string>>& row) {
  std::string text;
  for (size_t i = 0; i < row.size(); ++i) text += (i ? "|" : "") + row[i].value_or("NULL");
  return text;
}

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

// The message of the StoreError that `action` throws; any other outcome fails the test.
template <typename Action>
std::string store_error_of(Action&& action) {
  try {
    action();
  } catch (const StoreError& error) {
    return error.what();
  }
  FAIL("expected a StoreError");
  return {};
}

bool is_utc_timestamp(const std::string& text) {
  static const std::regex pattern(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)");
  return std::regex_match(text, pattern);
}

}  // namespace

TEST_CASE("a run round-trips with its steps, expert load, events and time to target", "[store]") {
  TempFolder dir;
  const std::string db_path = dir.file("results.db");
  int64_t run = 0;
  {
    auto store = ResultsStore::open(db_path);
    CHECK(store->path() == db_path);
    run = store->begin_run(sample_run("round-trip"));
    store->add_step(run, sample_step(1));
    store->add_step(run, sample_step(2, 3.5));
    store->add_step(run, sample_step(3));
    lrmoe::StepRecord diverged = sample_step(4);
    diverged.train_loss = std::nan("");  // SQLite stores NaN as NULL; it must still be written
    store->add_step(run, diverged);
    store->add_expert_load(run, 2, 0, {30, 10, 0, 60});
    store->add_expert_load(run, 2, 1, {25, 25, 25, 25});
    store->add_event(run, "info", "evaluation reached the target");
    store->finish_run(run, "finished", lrmoe::TimeToTarget{2, 1.0, 0.4, 0.125});
  }

  auto store = ResultsStore::open_read_only(db_path);
  const auto summary = store->find_run(run);
  REQUIRE(summary);
  CHECK(summary->id == run);
  CHECK(summary->name == "round-trip");
  CHECK(summary->status == "finished");
  CHECK(is_utc_timestamp(summary->started_at));
  REQUIRE(summary->ended_at);
  CHECK(is_utc_timestamp(*summary->ended_at));
  CHECK(*summary->ended_at >= summary->started_at);
  CHECK(summary->resolved_toml == "[experiment]\nname = \"round-trip\"\n");
  CHECK(summary->toml_sha256 == "3f1c");
  CHECK(summary->code_version == "v0.1.0-test");
  CHECK(summary->host == lrmoe::store::this_host_name());
  CHECK(summary->torch_version == "1.13.1");
  CHECK(summary->blas == "openblas");
  CHECK(summary->seed == 0xFEDCBA9876543210ULL);
  CHECK(summary->params_total == 1'000'000);
  CHECK(summary->params_active == 250'000);
  CHECK(summary->ranks == 4);
  CHECK(summary->policies == "fixed_ownership/gate/keep_all/owner");
  CHECK(summary->target_loss == 2.5);
  REQUIRE(summary->time_to_target);
  CHECK(summary->time_to_target->step == 2);
  CHECK(summary->time_to_target->step_seconds == 1.0);
  CHECK(summary->time_to_target->moe_seconds == 0.4);
  CHECK(summary->time_to_target->moe_modeled_seconds == 0.125);
  CHECK(summary->steps == 4);
  CHECK_FALSE(summary->final_train_loss);  // the last step's loss was NaN
  CHECK(summary->final_eval_loss == 3.5);  // the last evaluated step, not the last step

  const auto steps = store->steps(run);
  REQUIRE(steps.size() == 4);
  CHECK(steps[0].step == 1);
  CHECK(steps[0].train_loss == sample_step(1).train_loss);
  CHECK_FALSE(steps[0].eval_loss);
  CHECK(steps[1].eval_loss == 3.5);
  CHECK(steps[1].lr == 3e-4);
  CHECK(steps[1].grad_norm == 1.25);
  CHECK(steps[1].tokens == 4096);
  CHECK(steps[1].step_seconds == 0.5);
  CHECK(steps[1].moe_seconds == 0.2);
  CHECK(steps[1].moe_modeled_seconds == 0.0625);
  CHECK(std::isnan(steps[3].train_loss));

  CHECK(scalar(*store, "SELECT sum(pairs) FROM expert_load WHERE layer = 0") == "100");
  CHECK(scalar(*store, "SELECT share FROM expert_load_share WHERE layer = 0 AND expert = 3") ==
        "0.6");
  CHECK(scalar(*store, "SELECT count(*) FROM expert_load_share WHERE layer = 1") == "4");
  CHECK(scalar(*store, "SELECT level || ': ' || message FROM events") ==
        "info: evaluation reached the target");
  CHECK(is_utc_timestamp(scalar(*store, "SELECT time FROM events")));
  CHECK(row_text(store->query("SELECT ranks, policies, ttt_moe_modeled_seconds FROM run_summary")
                     .rows.at(0)) == "4|fixed_ownership/gate/keep_all/owner|0.125");

  const auto runs = store->list_runs();
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].steps == 4);
  CHECK_FALSE(store->find_run(run + 1));
}

TEST_CASE("a run without evaluation or target reads back empty optionals", "[store]") {
  TempFolder dir;
  auto store = ResultsStore::open(dir.file("results.db"));
  lrmoe::RunInfo info = sample_run("no-target");
  info.target_loss.reset();
  const int64_t run = store->begin_run(info);
  store->add_step(run, sample_step(1));
  store->finish_run(run, "stopped", std::nullopt);

  const auto summary = store->find_run(run);
  REQUIRE(summary);
  CHECK(summary->status == "stopped");
  CHECK_FALSE(summary->target_loss);
  CHECK_FALSE(summary->time_to_target);
  CHECK_FALSE(summary->final_eval_loss);
  CHECK(summary->final_train_loss == sample_step(1).train_loss);
}

TEST_CASE("a run's plugins are written at once, all or none", "[store]") {
  TempFolder dir;
  const std::string db_path = dir.file("results.db");
  auto writer = ResultsStore::open(db_path);
  auto reader = ResultsStore::open_read_only(db_path);
  const int64_t run = writer->begin_run(sample_run("plugins"));
  const std::string id = std::to_string(run);
  const std::vector<lrmoe::PluginRecordRow> plugins = {
      {"placement", "fixed_ownership", "1.0.0", "", "/p/placement.so", "aa"},
      {"metric", "gate", "1.1.0", "power = 2.0\n", "/p/metric.so", "bb"},
      {"selection", "keep_all", "1.2.0", "", "/p/selection.so", "cc"},
      {"routing", "owner", "1.3.0", "", "/p/routing.so", "dd"}};

  SECTION("without a flush") {
    writer->add_plugins(run, plugins);
    const lrmoe::QueryResult rows = reader->query("SELECT * FROM run_plugins ORDER BY version");
    CHECK(rows.columns == std::vector<std::string>{"run", "kind", "name", "version", "parameters",
                                                   "path", "sha256"});
    REQUIRE(rows.rows.size() == 4);
    CHECK(row_text(rows.rows[0]) == id + "|placement|fixed_ownership|1.0.0||/p/placement.so|aa");
    CHECK(row_text(rows.rows[1]) == id + "|metric|gate|1.1.0|power = 2.0\n|/p/metric.so|bb");
    CHECK(row_text(rows.rows[2]) == id + "|selection|keep_all|1.2.0||/p/selection.so|cc");
    CHECK(row_text(rows.rows[3]) == id + "|routing|owner|1.3.0||/p/routing.so|dd");
  }

  SECTION("a bad plugin keeps the others out too") {
    std::vector<lrmoe::PluginRecordRow> two_metrics = plugins;
    two_metrics.push_back(plugins[1]);
    CHECK_THAT(store_error_of([&] { writer->add_plugins(run, two_metrics); }),
               Contains("UNIQUE constraint failed"));
    std::vector<lrmoe::PluginRecordRow> unknown_kind = plugins;
    unknown_kind.back().kind = "router";
    CHECK_THAT(store_error_of([&] { writer->add_plugins(run, unknown_kind); }),
               Contains("CHECK constraint failed"));
    CHECK(scalar(*reader, "SELECT count(*) FROM run_plugins") == "0");
    writer->add_plugins(run, plugins);  // the store keeps working
    CHECK(scalar(*reader, "SELECT count(*) FROM run_plugins") == "4");
  }
}

TEST_CASE("layer statistics and rank memory round-trip, buffered until a flush", "[store]") {
  TempFolder dir;
  const std::string db_path = dir.file("results.db");
  auto writer = ResultsStore::open(db_path);
  auto reader = ResultsStore::open_read_only(db_path);
  const int64_t run = writer->begin_run(sample_run("statistics"));
  const std::string id = std::to_string(run);
  writer->add_layer_step(run, sample_layer_step(3, 1));
  writer->add_rank_memory(run, rank_memory_row(3, 2, {11, 12, 13, 14, 15, 16, 17}));
  writer->add_rank_layer(run, {3, 1, 2, 21, 22, 23, 24});
  writer->add_process_layer(run, {3, 1, 1, 31, 32, 0.25, 4, 0.5, 0.75});
  CHECK(scalar(*reader, "SELECT count(*) FROM moe_layer_steps") == "0");
  CHECK(scalar(*reader, "SELECT count(*) FROM rank_memory") == "0");
  CHECK(scalar(*reader, "SELECT count(*) FROM rank_layer_steps") == "0");
  CHECK(scalar(*reader, "SELECT count(*) FROM process_layer_steps") == "0");
  writer->flush();

  SECTION("every field reads back in its column") {
    const lrmoe::QueryResult layer = reader->query("SELECT * FROM moe_layer_steps");
    CHECK(layer.columns == std::vector<std::string>{"run",
                                                    "step",
                                                    "layer",
                                                    "pairs_routed",
                                                    "pairs_dropped",
                                                    "pairs_kept",
                                                    "replicas",
                                                    "forward_load_max",
                                                    "forward_load_mean",
                                                    "backward_load_max",
                                                    "backward_load_mean",
                                                    "bytes_forward_dispatch",
                                                    "bytes_forward_combine",
                                                    "bytes_backward_dispatch",
                                                    "bytes_backward_return",
                                                    "bytes_replica_sync",
                                                    "forward_seconds",
                                                    "backward_seconds",
                                                    "modeled_seconds",
                                                    "placement_seconds",
                                                    "metric_seconds",
                                                    "selection_seconds",
                                                    "routing_seconds",
                                                    "compaction_seconds",
                                                    "measured_exchange_bytes",
                                                    "measured_exchange_seconds",
                                                    "critical_path_seconds",
                                                    "rank_sum_seconds",
                                                    "modeled_compute_seconds",
                                                    "modeled_all_to_all_seconds",
                                                    "modeled_gather_seconds",
                                                    "modeled_replica_seconds"});
    REQUIRE(layer.rows.size() == 1);
    CHECK(row_text(layer.rows[0]) ==
          id + "|3|1|100|3|90|2|40|24.25|30|22.5|1001|1002|1003|1004|1005|0.5|0.75|0.375|"
               "0.0625|0.03125|0.015625|0.125|0.25|2048|0.5|0.0|0.0|0.0|0.0|0.0|0.0");

    const lrmoe::QueryResult ranks = reader->query("SELECT * FROM rank_layer_steps");
    CHECK(ranks.columns == std::vector<std::string>{"run", "step", "layer", "rank", "forward_pairs",
                                                    "backward_pairs", "bytes_sent",
                                                    "bytes_received", "forward_seconds",
                                                    "backward_seconds"});
    REQUIRE(ranks.rows.size() == 1);
    CHECK(row_text(ranks.rows[0]) == id + "|3|1|2|21|22|23|24|0.0|0.0");

    const lrmoe::QueryResult processes = reader->query("SELECT * FROM process_layer_steps");
    CHECK(processes.columns == std::vector<std::string>{"run", "step", "layer", "process",
                                                        "bytes_sent", "bytes_received",
                                                        "exchange_seconds", "exchange_calls",
                                                        "forward_seconds", "backward_seconds"});
    REQUIRE(processes.rows.size() == 1);
    CHECK(row_text(processes.rows[0]) == id + "|3|1|1|31|32|0.25|4|0.5|0.75");
    CHECK(scalar(*reader, "SELECT send_bytes_per_second FROM exchange_summary") == "124.0");

    const lrmoe::QueryResult memory = reader->query("SELECT * FROM rank_memory");
    CHECK(memory.columns ==
          std::vector<std::string>{"run", "step", "rank", "owned", "replicas", "gradients",
                                   "optimizer", "forward_tokens", "backward_tokens", "dense",
                                   "peak_phase", "peak_layer", "peak_subtotal", "subtotal_phase",
                                   "subtotal_layer", "measured_peak"});
    REQUIRE(memory.rows.size() == 1);
    // Not a timeline's peak: no moment, and no measured peak (NULL).
    CHECK(row_text(memory.rows[0]) == id + "|3|2|11|12|13|14|15|16|17||0|NULL||0|NULL");
  }

  SECTION("one row per run, step and layer or rank") {
    writer->add_layer_step(run, sample_layer_step(3, 1));
    CHECK_THAT(store_error_of([&] { writer->flush(); }),
               Contains("UNIQUE constraint failed: moe_layer_steps.run"));
    writer->add_rank_memory(run, rank_memory_row(3, 2, {0, 0, 0, 0, 0, 0, 0}));
    CHECK_THAT(store_error_of([&] { writer->flush(); }),
               Contains("UNIQUE constraint failed: rank_memory.run"));
    writer->add_layer_step(run, sample_layer_step(3, 2));
    writer->add_rank_memory(run, rank_memory_row(4, 2, {0, 0, 0, 0, 0, 0, 0}));
    writer->flush();
    CHECK(scalar(*reader, "SELECT count(*) FROM moe_layer_steps") == "2");
    CHECK(scalar(*reader, "SELECT count(*) FROM rank_memory") == "2");
  }
}

TEST_CASE("memory_peak and layer_summary aggregate the per-step rows", "[store]") {
  TempFolder dir;
  auto store = ResultsStore::open(dir.file("results.db"));
  const int64_t run = store->begin_run(sample_run("views"));
  const int64_t other = store->begin_run(sample_run("other"));
  const std::string id = std::to_string(run);

  SECTION("memory_peak: the largest subtotal and total of any step, per run and rank") {
    // Rank 0's subtotal peaks in step 2, its total (optimizer state) in step 3; adding up each
    // category's own maximum would give a subtotal of 250.
    //                           step rank owned replicas gradients optimizer fwd bwd dense
    // 210, total 235
    store->add_rank_memory(run, rank_memory_row(1, 0, {100, 0, 10, 10, 70, 40, 5}));
    // 240, total 265
    store->add_rank_memory(run, rank_memory_row(2, 0, {100, 30, 10, 10, 60, 50, 5}));
    // 190, total 405
    store->add_rank_memory(run, rank_memory_row(3, 0, {100, 0, 10, 200, 50, 40, 5}));
    // 110, total 131
    store->add_rank_memory(run, rank_memory_row(1, 1, {80, 0, 8, 8, 20, 10, 5}));
    store->add_rank_memory(other, rank_memory_row(1, 0, {1000, 0, 0, 0, 0, 0, 0}));
    store->flush();
    const lrmoe::QueryResult peaks = store->query(
        "SELECT run, rank, peak_subtotal, peak_total FROM memory_peak ORDER BY run, rank");
    REQUIRE(peaks.rows.size() == 3);
    CHECK(row_text(peaks.rows[0]) == id + "|0|240|405");
    CHECK(row_text(peaks.rows[1]) == id + "|1|110|131");
    CHECK(row_text(peaks.rows[2]) == std::to_string(other) + "|0|1000|1000");
  }

  SECTION("layer_summary: sums over the steps and the mean imbalance, per run and layer") {
    lrmoe::LayerStepRecord record = sample_layer_step(1, 0);
    record.forward_load_max = 6;  // imbalance 1.5
    record.forward_load_mean = 4;
    record.backward_load_max = 3;  // 1.0
    record.backward_load_mean = 3;
    store->add_layer_step(run, record);
    record.step = 2;
    record.forward_load_max = 5;  // 1.0
    record.forward_load_mean = 5;
    record.backward_load_max = 4;  // 2.0
    record.backward_load_mean = 2;
    store->add_layer_step(run, record);
    record.step = 3;  // no load at all: left out of the imbalance
    record.forward_load_max = record.backward_load_max = 0;
    record.forward_load_mean = record.backward_load_mean = 0;
    store->add_layer_step(run, record);
    store->add_layer_step(run, sample_layer_step(1, 1));
    store->add_layer_step(other, sample_layer_step(1, 0));
    store->flush();

    const lrmoe::QueryResult layers = store->query(
        "SELECT layer, steps, pairs_routed, pairs_dropped, pairs_kept, bytes_forward_dispatch, "
        "bytes_forward_combine, bytes_backward_dispatch, bytes_backward_return, "
        "bytes_replica_sync, forward_seconds, backward_seconds, modeled_seconds, "
        "forward_imbalance, backward_imbalance FROM layer_summary WHERE run = " +
        id + " ORDER BY layer");
    REQUIRE(layers.rows.size() == 2);
    CHECK(row_text(layers.rows[0]) ==
          "0|3|300|9|270|3003|3006|3009|3012|3015|1.5|2.25|1.125|1.25|1.5");
    CHECK(row_text(layers.rows[1]).rfind("1|1|100|3|90|1001|", 0) == 0);
    CHECK(scalar(*store, "SELECT count(*) FROM layer_summary") == "3");
  }
}

TEST_CASE("buffered rows reach other connections only when flushed", "[store]") {
  TempFolder dir;
  const std::string db_path = dir.file("results.db");
  auto writer = ResultsStore::open(db_path);
  const int64_t run = writer->begin_run(sample_run("batched"));
  auto reader = ResultsStore::open_read_only(db_path);

  SECTION("flush writes everything buffered") {
    for (int64_t step = 1; step <= 5000; ++step) writer->add_step(run, sample_step(step));
    CHECK(reader->steps(run).empty());
    CHECK(reader->find_run(run)->steps == 0);
    writer->flush();
    const auto steps = reader->steps(run);
    REQUIRE(steps.size() == 5000);
    CHECK(steps.front().step == 1);
    CHECK(steps.back().step == 5000);
    writer->flush();  // nothing buffered: a no-op
    CHECK(reader->find_run(run)->steps == 5000);
  }

  SECTION("a large buffer flushes on its own") {
    const std::vector<int64_t> pairs(1000, 7);
    for (int64_t step = 1; step <= 25; ++step) writer->add_expert_load(run, step, 0, pairs);
    CHECK(std::stoll(scalar(*reader, "SELECT count(*) FROM expert_load")) > 20000);
  }

  SECTION("finish_run flushes first") {
    writer->add_step(run, sample_step(1));
    writer->add_event(run, "info", "done");
    writer->finish_run(run, "finished", std::nullopt);
    CHECK(reader->steps(run).size() == 1);
    CHECK(scalar(*reader, "SELECT count(*) FROM events") == "1");
  }

  SECTION("the destructor flushes") {
    writer->add_step(run, sample_step(1));
    writer.reset();
    CHECK(reader->steps(run).size() == 1);
  }
}

TEST_CASE("a failed flush drops its batch, says so, and the store keeps working", "[store]") {
  TempFolder dir;
  auto store = ResultsStore::open(dir.file("results.db"));
  const int64_t run = store->begin_run(sample_run("duplicate-step"));
  store->add_step(run, sample_step(1));
  store->add_step(run, sample_step(1));
  store->add_event(run, "info", "lost with the batch");
  REQUIRE_THAT(
      store_error_of([&] { store->flush(); }),
      Contains("UNIQUE constraint failed") && Contains("3 buffered rows were not written"));
  store->finish_run(run, "failed", std::nullopt);
  CHECK(store->find_run(run)->status == "failed");
  CHECK(store->find_run(run)->steps == 0);
}

TEST_CASE("finishing an unknown run or with an unknown status is refused", "[store]") {
  TempFolder dir;
  auto store = ResultsStore::open(dir.file("results.db"));
  const int64_t run = store->begin_run(sample_run("statuses"));
  CHECK_THAT(store_error_of([&] { store->finish_run(run + 1, "finished", std::nullopt); }),
             Contains("no such run"));
  CHECK_THAT(store_error_of([&] { store->finish_run(run, "exploded", std::nullopt); }),
             Contains("CHECK constraint failed"));
  CHECK(store->find_run(run)->status == "running");
}

TEST_CASE("the database uses WAL, a 5 s busy timeout and foreign keys", "[store]") {
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
  CHECK(scalar(*store, "PRAGMA busy_timeout") == "5000");
  CHECK(scalar(*store, "PRAGMA foreign_keys") == "1");
  CHECK(scalar(*store, "PRAGMA user_version") == std::to_string(lrmoe::current_schema_version()));
  // Foreign keys are enforced: a step of a run that does not exist cannot be written.
  store->add_step(42, sample_step(1));
  CHECK_THAT(store_error_of([&] { store->flush(); }), Contains("FOREIGN KEY constraint failed"));
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
    db.execute("CREATE TABLE from_the_future (x); PRAGMA user_version = " + std::to_string(newer));
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

  std::ostringstream runs;
  CHECK(lrmoe::run_runs_command(db_path, runs) == 0);
  CHECK_THAT(runs.str(), Contains("started (UTC)") && Contains("demo") && Contains("finished") &&
                             Contains("9.5000") && Contains("2.5000") && Contains("20.0"));

  std::ostringstream show;
  CHECK(lrmoe::run_show_command(db_path, run, show) == 0);
  CHECK_THAT(show.str(), Contains("run " + std::to_string(run) + ": demo") &&
                             Contains("1,000,000 total, 250,000 active") &&
                             Contains("step 40, 20.0 s, 8.0 s of it in MoE layers") &&
                             Contains("min 9.5000  max 9.9900") &&
                             Contains("min 2.5000  max 2.9000") && Contains("█"));
  CHECK_THAT(show.str(), !Contains("[experiment]"));  // the TOML is left out

  std::ostringstream unknown;
  CHECK(lrmoe::run_show_command(db_path, run + 1, unknown) == 1);
  CHECK(unknown.str().empty());

  std::ostringstream query;
  CHECK(lrmoe::run_query_command(db_path, "SELECT count(*) AS n FROM steps", query) == 0);
  CHECK(query.str() == " n\n--\n50\n(1 row)\n");

  CHECK_THAT(store_error_of([&] { lrmoe::run_runs_command(dir.file("missing.db"), runs); }),
             Contains("no such file"));
}
