// `lrmoe project` (Note [Projection at full size]): a run projected at its own size computes what
// the run computed, a full-size projection scales to the full model's layers and is recorded and
// shown by `lrmoe compare`.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/store_samples.hpp"
#include "support/temp_folder.hpp"

using Catch::Matchers::Contains;
using lrmoe_test::kTinyExperiment;
using lrmoe_test::run_lrmoe;
using lrmoe_test::scalar;
using lrmoe_test::TempFolder;

namespace {

// Trains tiny-moe under fixed ownership on 4 ranks for 6 steps of 128 tokens in `db`: run 1.
void train_tiny_run(const TempFolder& dir, const std::string& db) {
  const auto [code, output] = run_lrmoe({"run",   kTinyExperiment,
                                         "--set", "train.max_steps=6",
                                         "--set", "train.warmup_steps=2",
                                         "--set", "train.target_loss=0",
                                         "--set", "train.batch_size=4",
                                         "--set", "train.seq_len=32",
                                         "--set", "train.micro_batches=1",
                                         "--set", "cluster.ranks=4",
                                         "--set", "cluster.slots_per_rank=3",
                                         "--set", "policies.bundle=fixed",
                                         "--db",  db},
                                        dir.file("run.log"));
  INFO(output);
  REQUIRE(code == 0);
}

}  // namespace

TEST_CASE("a run projected at its own size computes the expert work the run computed",
          "[projection][slow]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  train_tiny_run(dir, db);
  // 128 tokens on 4 ranks: 32 a rank, the run's own; fixed ownership puts every pair on its
  // expert's owner, so each rank's expert GEMMs are the run's whatever the replayed pairs' homes.
  const auto [code, output] =
      run_lrmoe({"project", "1", "--db", db, "--model", "tiny-moe", "--ranks", "4",
                 "--tokens-per-rank", "32", "--profile", "h100-sxm-8gpu-ib400", "--samples", "2"},
                dir.file("project.log"));
  INFO(output);
  REQUIRE(code == 0);
  const auto store = lrmoe::ResultsStore::open_read_only(db);
  CHECK(scalar(*store,
               "SELECT sampled_steps || ' ' || steps || ' ' || reached || ' ' || "
               "memory_per_rank FROM run_projections") == "3,6 6 0 100x fixed");
  // The mean over the sampled steps of the run's modeled compute, summed over its MoE layers.
  CHECK(scalar(*store, R"(
SELECT abs(p.compute_seconds - r.compute) < 1e-12 * r.compute FROM run_projections p,
  (SELECT sum(modeled_compute_seconds) / 2 AS compute FROM moe_layer_steps
   WHERE run = 1 AND step IN (3, 6)) r)") == "1");
  CHECK(scalar(*store,
               "SELECT abs(projected_seconds - steps * (compute_seconds + all_to_all_seconds + "
               "gather_seconds + transfer_seconds)) < 1e-9 * projected_seconds FROM "
               "run_projections") == "1");
}

TEST_CASE("a full-size projection covers the full model's layers and compare shows it",
          "[projection][slow]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  train_tiny_run(dir, db);
  const auto [code, output] = run_lrmoe(
      {"project", "1", "--db", db, "--model", "qwen3-30b-a3b", "--ranks", "16", "--tokens-per-rank",
       "256,4096", "--profile", "h100-sxm-8gpu-ib400", "--samples", "1"},
      dir.file("project.log"));
  INFO(output);
  REQUIRE(code == 0);
  CHECK_THAT(output, Contains("qwen3-30b-a3b     16          256  h100-sxm-8gpu-ib400"));
  const auto store = lrmoe::ResultsStore::open_read_only(db);
  CHECK(scalar(*store,
               "SELECT count(*) FROM run_projections WHERE failed IS NULL AND "
               "projected_seconds > 0 AND compute_seconds > 0") == "2");
  // Sixteen times the tokens: more expert work a step.
  CHECK(scalar(*store,
               "SELECT max(compute_seconds) / min(compute_seconds) > 4 FROM "
               "run_projections") == "1");
  const auto [compared, table] = run_lrmoe({"compare", "1", "--db", db}, dir.file("compare.log"));
  INFO(table);
  REQUIRE(compared == 0);
  CHECK_THAT(table, Contains("MoE time to target projected at full size"));
  CHECK_THAT(table, Contains("qwen3-30b-a3b, 16 x 4096, h100-sxm-8gpu-ib400"));
  // The run missed its target (0): the headline column shows it did not reach it.
  CHECK_THAT(table, Contains("∞"));
}

TEST_CASE(
    "a projection grid made on two threads records what one thread makes, and a second run keeps "
    "it",
    "[projection][slow]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  train_tiny_run(dir, db);
  const std::vector<std::string> grid{
      "project",           "1",        "--db",      db,
      "--model",           "tiny-moe", "--ranks",   "2,4",
      "--tokens-per-rank", "32,64",    "--profile", "h100-sxm-8gpu-ib400,h200-sxm-8gpu-ib400",
      "--samples",         "2"};
  const std::string rows =
      "SELECT group_concat(ranks || ' ' || tokens_per_rank || ' ' || profile || ' ' || "
      "projected_seconds, '; ') FROM (SELECT * FROM run_projections ORDER BY ranks, "
      "tokens_per_rank, profile)";
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> command = grid;
    command.insert(command.end(), extra.begin(), extra.end());
    return command;
  };
  const auto [parallel, parallel_log] = run_lrmoe(with({"--jobs", "2"}), dir.file("jobs2.log"));
  INFO(parallel_log);
  REQUIRE(parallel == 0);
  const std::string made_in_parallel = scalar(*lrmoe::ResultsStore::open_read_only(db), rows);
  CHECK(scalar(*lrmoe::ResultsStore::open_read_only(db), "SELECT count(*) FROM run_projections") ==
        "8");

  // Run again: every projection is in the database for the same sampled steps, and kept.
  const auto [kept, kept_log] = run_lrmoe(grid, dir.file("kept.log"));
  INFO(kept_log);
  REQUIRE(kept == 0);
  CHECK_THAT(kept_log, Contains("8 of 8 projections are in"));

  // Remade on one thread: the same figures, to the last digit.
  const auto [again, again_log] = run_lrmoe(with({"--again"}), dir.file("again.log"));
  INFO(again_log);
  REQUIRE(again == 0);
  CHECK_THAT(again_log, !Contains("projections are in"));
  CHECK(scalar(*lrmoe::ResultsStore::open_read_only(db), rows) == made_in_parallel);
}

TEST_CASE("a run that failed before its first steps is skipped by project, with a line saying so",
          "[projection][slow]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  train_tiny_run(dir, db);
  // Run 2: its first plan does not fit, so it records no loads.
  const auto [failed, failed_log] =
      run_lrmoe({"run", kTinyExperiment, "--db", db, "--set", "cluster.ranks=2", "--set",
                 "cluster.memory_per_rank=2500KB"},
                dir.file("failed.log"));
  REQUIRE(failed == 1);
  const auto [code, log] = run_lrmoe({"project", "1", "2", "--db", db, "--model", "tiny-moe",
                                      "--ranks", "4", "--tokens-per-rank", "32"},
                                     dir.file("project.log"));
  INFO(log);
  REQUIRE(code == 0);
  CHECK_THAT(log, Contains("run 2 failed after 0 step(s): nothing to replay, skipped"));
  CHECK(scalar(*lrmoe::ResultsStore::open_read_only(db),
               "SELECT group_concat(DISTINCT run) FROM run_projections") == "1");
}
