// The results store's records: runs, steps, expert load, events, plugins, layer statistics and
// rank memory written and read back field by field, the summary views over them, buffering until
// a flush, and writes the schema refuses.

#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "store/local_process.hpp"
#include "store/results_store.hpp"
#include "support/rank_memory_row.hpp"
#include "support/store_samples.hpp"
#include "support/temp_folder.hpp"

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
                                                    "modeled_replica_seconds",
                                                    "placement_information",
                                                    "measured_parameter_bytes",
                                                    "measured_parameter_seconds",
                                                    "bytes_cross_node",
                                                    "modeled_overlapped_seconds",
                                                    "modeled_hidden_transfer_seconds"});
    REQUIRE(layer.rows.size() == 1);
    CHECK(row_text(layer.rows[0]) ==
          id + "|3|1|100|3|90|2|40|24.25|30|22.5|1001|1002|1003|1004|1005|0.5|0.75|0.375|"
               "0.0625|0.03125|0.015625|0.125|0.25|2048|0.5|0.0|0.0|0.0|0.0|0.0|0.0|this pass|0|"
               "0.0|0|0.0|0.0");

    const lrmoe::QueryResult ranks = reader->query("SELECT * FROM rank_layer_steps");
    CHECK(ranks.columns == std::vector<std::string>{"run", "step", "layer", "rank", "forward_pairs",
                                                    "backward_pairs", "bytes_sent",
                                                    "bytes_received", "forward_seconds",
                                                    "backward_seconds"});
    REQUIRE(ranks.rows.size() == 1);
    CHECK(row_text(ranks.rows[0]) == id + "|3|1|2|21|22|23|24|0.0|0.0");

    const lrmoe::QueryResult processes = reader->query("SELECT * FROM process_layer_steps");
    CHECK(processes.columns ==
          std::vector<std::string>{"run", "step", "layer", "process", "bytes_sent",
                                   "bytes_received", "exchange_seconds", "exchange_calls",
                                   "forward_seconds", "backward_seconds", "parameter_bytes_sent",
                                   "parameter_bytes_received", "parameter_seconds",
                                   "parameter_calls", "parameter_blocked_seconds"});
    REQUIRE(processes.rows.size() == 1);
    CHECK(row_text(processes.rows[0]) == id + "|3|1|1|31|32|0.25|4|0.5|0.75|0|0|0.0|0|0.0");
    CHECK(scalar(*reader, "SELECT send_bytes_per_second FROM exchange_summary") == "124.0");

    const lrmoe::QueryResult memory = reader->query("SELECT * FROM rank_memory");
    CHECK(memory.columns ==
          std::vector<std::string>{"run", "step", "rank", "owned", "replicas", "gradients",
                                   "optimizer", "forward_tokens", "backward_tokens", "dense",
                                   "peak_phase", "peak_layer", "peak_subtotal", "subtotal_phase",
                                   "subtotal_layer", "measured_peak", "measured_forward_peak",
                                   "measured_backward_peak"});
    REQUIRE(memory.rows.size() == 1);
    // Not a timeline's peak: no moment, and no measured peaks (NULL).
    CHECK(row_text(memory.rows[0]) == id + "|3|2|11|12|13|14|15|16|17||0|NULL||0|NULL|NULL|NULL");
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

  SECTION(
      "memory_peak: the largest subtotal, total and measured peak of any step, per run and rank") {
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
    // Measured on a device: the allocator's step peaks 500 and 700 (the other run: the CPU).
    lrmoe::RankMemoryRecord measured = rank_memory_row(4, 0, {0, 0, 0, 0, 0, 0, 0});
    measured.measured_peak = 500;
    store->add_rank_memory(run, measured);
    measured = rank_memory_row(5, 0, {0, 0, 0, 0, 0, 0, 0});
    measured.measured_peak = 700;
    store->add_rank_memory(run, measured);
    store->add_rank_memory(other, rank_memory_row(1, 0, {1000, 0, 0, 0, 0, 0, 0}));
    store->flush();
    const lrmoe::QueryResult peaks = store->query(
        "SELECT run, rank, peak_subtotal, peak_total, measured_peak FROM memory_peak "
        "ORDER BY run, rank");
    REQUIRE(peaks.rows.size() == 3);
    CHECK(row_text(peaks.rows[0]) == id + "|0|240|405|700");
    CHECK(row_text(peaks.rows[1]) == id + "|1|110|131|NULL");
    CHECK(row_text(peaks.rows[2]) == std::to_string(other) + "|0|1000|1000|NULL");
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
