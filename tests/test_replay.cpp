// Replay (Note [Replay]): the per-expert counts it makes from shares (exact sum, the one-pair-
// per-token cap), how it rescales a source's loads to another expert count, the synthetic skew,
// the pairs it hands the pipeline (pair order, balanced homes), and `lrmoe replay` end to end:
// driven by a run's recorded loads under fixed ownership it reproduces that run's memory peaks,
// and its variants are recorded as a sweep that `lrmoe compare` reads.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/replay/allocated_timeline.hpp"
#include "core/replay/expert_loads.hpp"
#include "core/replay/replay_pairs.hpp"
#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/gpu.hpp"
#include "support/store_samples.hpp"
#include "support/temp_folder.hpp"

using Catch::Matchers::Contains;
using lrmoe_test::kTinyExperiment;
using lrmoe_test::run_lrmoe;
using lrmoe_test::scalar;
using lrmoe_test::TempFolder;

namespace {

double max_over_mean(const std::vector<double>& shares) {
  return *std::max_element(shares.begin(), shares.end()) * static_cast<double>(shares.size());
}

}  // namespace

TEST_CASE("expert counts from shares sum to tokens times top-k and follow the shares", "[replay]") {
  const std::vector<int64_t> counts =
      lrmoe::expert_counts_from_shares({0.5, 0.3, 0.2, 0.0}, 1000, 2);
  CHECK(counts == std::vector<int64_t>{1000, 600, 400, 0});
  // Thirds of 100 pairs: the largest remainders go to the lower experts.
  CHECK(lrmoe::expert_counts_from_shares({1, 1, 1}, 50, 2) == std::vector<int64_t>{34, 33, 33});
}

TEST_CASE("no expert gets more pairs than there are tokens, and its excess goes to the others",
          "[replay]") {
  // 0.9 of 200 pairs would be 180 for expert 0, but a token picks an expert once: 100.
  const std::vector<int64_t> counts = lrmoe::expert_counts_from_shares({0.9, 0.05, 0.05}, 100, 2);
  CHECK(counts == std::vector<int64_t>{100, 50, 50});
  CHECK(std::accumulate(counts.begin(), counts.end(), int64_t{0}) == 200);
}

TEST_CASE("rescaled shares split source experts evenly, merge neighbours, and keep the imbalance",
          "[replay]") {
  const std::vector<int64_t> source{60, 20, 10, 10};
  const std::vector<double> same = lrmoe::rescale_shares(source, 4);
  CHECK_THAT(same, Catch::Matchers::Approx(std::vector<double>{0.6, 0.2, 0.1, 0.1}));
  const std::vector<double> split = lrmoe::rescale_shares(source, 8);
  CHECK_THAT(split, Catch::Matchers::Approx(
                        std::vector<double>{0.3, 0.3, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05}));
  CHECK(max_over_mean(split) == Approx(max_over_mean(same)));
  const std::vector<double> merged = lrmoe::rescale_shares(source, 2);
  CHECK_THAT(merged, Catch::Matchers::Approx(std::vector<double>{0.8, 0.2}));
  // Not a multiple: 4 source experts over 3 targets, each a third of the line.
  const std::vector<double> thirds = lrmoe::rescale_shares(source, 3);
  CHECK_THAT(thirds, Catch::Matchers::Approx(std::vector<double>{
                         0.6 + 0.2 / 3, 0.2 * 2 / 3 + 0.1 * 2 / 3, 0.1 / 3 + 0.1}));
}

TEST_CASE(
    "a zipf skew is balanced at exponent 0, and otherwise fixed per layer and steady over steps",
    "[replay]") {
  const lrmoe::SkewedLoads balanced(0.0, 8, 1);
  CHECK_THAT(balanced.shares(1, 0), Catch::Matchers::Approx(std::vector<double>(8, 0.125)));

  const lrmoe::SkewedLoads skewed(1.0, 8, 1);
  std::vector<double> sorted = skewed.shares(1, 0);
  std::sort(sorted.rbegin(), sorted.rend());
  double harmonic = 0;
  for (int i = 1; i <= 8; ++i) harmonic += 1.0 / i;
  for (int i = 0; i < 8; ++i) CHECK(sorted[i] == Approx(1.0 / (i + 1) / harmonic));
  CHECK(skewed.shares(5, 0) == skewed.shares(1, 0));
  CHECK(skewed.shares(1, 1) != skewed.shares(1, 0));
  CHECK_THROWS_WITH(lrmoe::SkewedLoads(-1.0, 8, 1), Contains("expected a number >= 0"));
}

TEST_CASE("replayed pairs are in pair order, follow the counts, and every rank homes as many",
          "[replay]") {
  const std::vector<int64_t> counts{40, 0, 17, 7};  // 64 pairs: 32 tokens, top 2
  const lrmoe::ReplayPairs pairs = lrmoe::replay_pairs(counts, 32, 2, 4, 7);
  REQUIRE(pairs.experts.numel() == 64);
  const auto* experts = pairs.experts.data_ptr<int64_t>();
  const auto* home = pairs.home.data_ptr<int64_t>();
  std::vector<int64_t> per_expert(4, 0), per_rank(4, 0);
  for (int64_t i = 0; i < 64; ++i) {
    ++per_expert[static_cast<std::size_t>(experts[i])];
    ++per_rank[static_cast<std::size_t>(home[i])];
    if (i > 0) {
      // By expert, then by token: home ranks never decrease within an expert.
      CHECK(experts[i - 1] <= experts[i]);
      if (experts[i - 1] == experts[i]) CHECK(home[i - 1] <= home[i]);
    }
  }
  CHECK(per_expert == counts);
  CHECK(per_rank == std::vector<int64_t>{16, 16, 16, 16});
  CHECK(pairs.gates.min().item<float>() >= 0.25F);
  CHECK(pairs.gates.max().item<float>() < 0.75F);
}

TEST_CASE(
    "replaying a run's recorded loads under fixed ownership reproduces the run's memory peaks",
    "[replay][slow]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  const std::vector<std::string> cluster{
      "--set", "cluster.ranks=4",       "--set", "cluster.slots_per_rank=3",
      "--set", "policies.bundle=fixed", "--db",  db};
  std::vector<std::string> run{"run",   kTinyExperiment,        "--set", "train.max_steps=6",
                               "--set", "train.warmup_steps=2", "--set", "train.target_loss=0"};
  run.insert(run.end(), cluster.begin(), cluster.end());
  const auto [trained, training_output] = run_lrmoe(run, dir.file("run.log"));
  REQUIRE(trained == 0);

  std::vector<std::string> replay{"replay", kTinyExperiment, "--loads-from", "1",        "--steps",
                                  "3",      "--variant",     "fixed",        "--record", "again"};
  replay.insert(replay.end(), cluster.begin(), cluster.end());
  const auto [replayed, output] = run_lrmoe(replay, dir.file("replay.log"));
  INFO(output);
  REQUIRE(replayed == 0);
  CHECK_THAT(output, Contains("recorded loads: run 1 of " + db + ", steps 4..6"));

  const auto store = lrmoe::ResultsStore::open_read_only(db);
  CHECK(scalar(*store, "SELECT kind || ' ' || status FROM runs WHERE id = 2") == "replay finished");
  // Replay step s is the run's step s + 3: the same loads, so the same holdings and peaks.
  const std::string differences = scalar(*store, R"(
SELECT count(*) FROM rank_memory t JOIN rank_memory r
  ON r.run = 2 AND t.run = 1 AND r.step + 3 = t.step AND r.rank = t.rank
WHERE r.owned != t.owned OR r.replicas != t.replicas OR r.forward_tokens != t.forward_tokens
   OR r.backward_tokens != t.backward_tokens OR r.optimizer != t.optimizer OR r.dense != t.dense
   OR r.peak_subtotal != t.peak_subtotal)");
  CHECK(differences == "0");
  CHECK(scalar(*store, "SELECT count(*) FROM rank_memory WHERE run = 2") == "12");
  CHECK(scalar(*store, R"(
SELECT count(*) FROM expert_load t JOIN expert_load r
  ON r.run = 2 AND t.run = 1 AND r.step + 3 = t.step AND r.layer = t.layer AND r.expert = t.expert
WHERE r.pairs != t.pairs)") == "0");
  // Nothing a replay does not measure is recorded as if it had.
  CHECK(scalar(*store,
               "SELECT count(*) FROM steps WHERE run = 2 AND train_loss IS NULL "
               "AND step_seconds IS NULL AND moe_modeled_seconds > 0") == "3");
  CHECK(scalar(*store, "SELECT target_loss IS NULL FROM runs WHERE id = 2") == "1");
}

TEST_CASE("a replay's variants are recorded as the cells of a sweep that compare reads",
          "[replay]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  const auto [code, output] = run_lrmoe(
      {"replay", kTinyExperiment, "--set", "cluster.ranks=4", "--set", "cluster.slots_per_rank=3",
       "--skew", "zipf:1.2", "--steps", "2", "--db", db, "--record", "skewed", "--variant", "fixed",
       "--variant", "half:policies.bundle=lrmoe,policies.placement.lrmoe.keep_fraction=0.5"},
      dir.file("replay.log"));
  INFO(output);
  REQUIRE(code == 0);
  CHECK_THAT(output, Contains("synthetic skew: zipf exponent 1.2 over 8 experts"));
  const auto [compared, table] = run_lrmoe(
      {"compare", "--sweep", "skewed", "--db", db, "--format", "csv"}, dir.file("compare.log"));
  INFO(table);
  REQUIRE(compared == 0);
  // Each variant goes by the name the replay gave it.
  CHECK_THAT(table, Contains("tiny-moe,fixed,1,0,"));
  CHECK_THAT(table, Contains("tiny-moe,half,1,0,"));
  const auto store = lrmoe::ResultsStore::open_read_only(db);
  // The lrmoe variant keeps half of the routed pairs in backward.
  CHECK(scalar(*store,
               "SELECT sum(pairs_kept) * 2 = sum(pairs_routed) FROM moe_layer_steps "
               "WHERE run = 2") == "1");
}

TEST_CASE("a replay reports SYMI's history-less first step apart and records what each plan used",
          "[replay]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  const auto [code, output] = run_lrmoe({"replay",    kTinyExperiment,
                                         "--set",     "cluster.ranks=4",
                                         "--set",     "cluster.slots_per_rank=3",
                                         "--skew",    "zipf:1.2",
                                         "--steps",   "3",
                                         "--db",      db,
                                         "--record",  "warm",
                                         "--variant", "fixed",
                                         "--variant", "symi:policies.bundle=symi",
                                         "--variant", "lrmoe:policies.bundle=lrmoe"},
                                        dir.file("replay.log"));
  INFO(output);
  REQUIRE(code == 0);
  CHECK_THAT(output, Contains("symi: 1 warm-up step(s)"));
  CHECK_THAT(output, !Contains("fixed: 1 warm-up") && !Contains("lrmoe: 1 warm-up"));
  const auto store = lrmoe::ResultsStore::open_read_only(db);
  CHECK(scalar(*store,
               "SELECT group_concat(run || ':' || step || ':' || placement_information, ' ') FROM "
               "(SELECT DISTINCT run, step, placement_information FROM moe_layer_steps "
               "ORDER BY run, step)") ==
        "1:1:no counts 1:2:no counts 1:3:no counts 2:1:warm-up 2:2:earlier passes "
        "2:3:earlier passes 3:1:this pass 3:2:this pass 3:3:this pass");
  // compare's modeled seconds per step leave SYMI's warm-up step out.
  const std::vector<lrmoe::RunFigures> figures = store->run_figures({2});
  REQUIRE(figures.at(0).modeled_seconds_per_step.has_value());
  CHECK(*figures.at(0).modeled_seconds_per_step ==
        Approx(std::stod(scalar(*store,
                                "SELECT avg(moe_modeled_seconds) FROM steps WHERE run = 2 AND "
                                "step > 1")))
            .epsilon(1e-9));
}

TEST_CASE(
    "SYMI planned ahead plans what it plans after the router, its fetch hidden behind the "
    "previous layer's forward compute and its deferred return behind the next one's backward",
    "[replay]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  const auto [code, output] =
      run_lrmoe({"replay",
                 kTinyExperiment,
                 "--set",
                 "cluster.ranks=4",
                 "--set",
                 "cluster.slots_per_rank=3",
                 "--skew",
                 "zipf:1.2",
                 "--steps",
                 "3",
                 "--db",
                 db,
                 "--record",
                 "ahead",
                 "--variant",
                 "ahead:policies.bundle=symi",
                 "--variant",
                 "apart:policies.bundle=symi,cluster.overlap_expert_fetch=false",
                 "--variant",
                 "waited:policies.bundle=symi,cluster.overlap_expert_fetch=false,"
                 "cluster.overlap_gradient_return=false"},
                dir.file("replay.log"));
  INFO(output);
  REQUIRE(code == 0);
  const auto store = lrmoe::ResultsStore::open_read_only(db);
  const auto rows = [&](int run, const std::string& columns, const std::string& table) {
    return scalar(*store, "SELECT group_concat(row, ' | ') FROM (SELECT " + columns +
                              " AS row FROM " + table + " WHERE run = " + std::to_string(run) +
                              " ORDER BY step, layer" +
                              (table == "rank_layer_steps" ? ", rank" : "") + ")");
  };
  // The same plans: placements, loads, bytes and every modeled part but the overlap.
  const std::string planned =
      "step || ':' || layer || ':' || placement_information || ':' || replicas || ':' || "
      "bytes_replica_sync || ':' || bytes_forward_dispatch || ':' || bytes_backward_dispatch || "
      "':' || modeled_compute_seconds || ':' || "
      "modeled_all_to_all_seconds || ':' || modeled_replica_seconds";
  CHECK(rows(1, planned, "moe_layer_steps") == rows(2, planned, "moe_layer_steps"));
  const std::string loads = "forward_pairs || ':' || backward_pairs";
  CHECK(rows(1, loads, "rank_layer_steps") == rows(2, loads, "rank_layer_steps"));
  // The first MoE layer has no layer before it; the second's fetch hides behind the first's
  // forward compute, at most the whole fetch.
  const auto number = [&](const std::string& query) { return std::stod(scalar(*store, query)); };
  // Unchunked, everything hidden is a parameter transfer.
  CHECK(scalar(*store,
               "SELECT count(*) FROM moe_layer_steps WHERE "
               "abs(modeled_overlapped_seconds - modeled_hidden_transfer_seconds) > 1e-12") == "0");
  for (int step = 2; step <= 3; ++step) {
    INFO("step " << step);
    const auto of = [&](int run, int layer, const std::string& column) {
      return number(
          "SELECT " + column + " FROM moe_layer_steps WHERE run = " + std::to_string(run) +
          " AND step = " + std::to_string(step) + " AND layer = " + std::to_string(layer));
    };
    CHECK(of(1, 0, "modeled_overlapped_seconds") == of(2, 0, "modeled_overlapped_seconds"));
    const double hidden =
        of(1, 1, "modeled_overlapped_seconds") - of(2, 1, "modeled_overlapped_seconds");
    REQUIRE(of(1, 1, "modeled_replica_seconds") > 0);
    CHECK(hidden > 0);
    CHECK(hidden < of(1, 1, "modeled_replica_seconds"));
    CHECK(hidden <= of(1, 0, "modeled_compute_seconds"));
    CHECK(of(1, 1, "modeled_seconds") == Approx(of(2, 1, "modeled_seconds") - hidden));
    // The second layer's gradient return, deferred, hides behind the first layer's backward;
    // waited for within the layer, it does not. The first layer's has nothing below it.
    CHECK(of(2, 0, "modeled_overlapped_seconds") == of(3, 0, "modeled_overlapped_seconds"));
    const double returned =
        of(2, 1, "modeled_overlapped_seconds") - of(3, 1, "modeled_overlapped_seconds");
    CHECK(returned > 0);
    CHECK(returned < of(2, 1, "modeled_replica_seconds"));
    CHECK(returned <= of(2, 0, "modeled_compute_seconds"));
  }
}

TEST_CASE("the default experiment replays under every bundle at a full-size preset", "[replay]") {
  // The default experiment writes the lrmoe placement's keep_fraction; the other bundles replay
  // it all the same (Note [Plugin parameters]).
  TempFolder dir;
  const auto [code, output] =
      run_lrmoe({"replay", "--set", "model.preset=qwen3-30b-a3b", "--skew", "zipf:0.5", "--steps",
                 "1", "--db", dir.file("results.db")},
                dir.file("replay.log"));
  INFO(output);
  REQUIRE(code == 0);
  for (const char* variant : {"fixed    fixed_ownership/", "symi     symi/", "lrmoe    lrmoe/"})
    CHECK_THAT(output, Contains(variant));
}

TEST_CASE(
    "a replay planned by 4 processes, exact or scalable, plans what one process plans, and "
    "times the slowest process",
    "[replay]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  for (const char* processes : {"1", "4"}) {
    const auto [code, output] = run_lrmoe(
        {"replay",      kTinyExperiment,
         "--set",       "cluster.ranks=4",
         "--set",       "cluster.slots_per_rank=3",
         "--skew",      "zipf:1.2",
         "--steps",     "3",
         "--db",        db,
         "--record",    std::string("by-") + processes,
         "--processes", processes,
         "--variant",   "fixed",
         "--variant",   "lrmoe",
         "--variant",   "lrmoe-scalable:policies.bundle=lrmoe,policies.planning=scalable"},
        dir.file("replay.log"));
    INFO(output);
    REQUIRE(code == 0);
    CHECK_THAT(output, Contains(std::string(processes) == "1"
                                    ? "planned by one process"
                                    : "planned by 4 processes of 1 ranks (threads here)"));
  }
  // Runs 1-3 by one process, 4-6 by four, variant for variant: the same plans, so the same
  // loads, bytes, memory and modeled time.
  const auto store = lrmoe::ResultsStore::open_read_only(db);
  CHECK(scalar(*store, "SELECT count(*) FROM moe_layer_steps WHERE run > 3") ==
        scalar(*store, "SELECT count(*) FROM moe_layer_steps WHERE run <= 3"));
  CHECK(scalar(*store, R"(
SELECT count(*) FROM moe_layer_steps a JOIN moe_layer_steps b
  ON b.run = a.run + 3 AND b.step = a.step AND b.layer = a.layer
WHERE a.run <= 3 AND (a.pairs_dropped != b.pairs_dropped OR a.pairs_kept != b.pairs_kept
   OR a.replicas != b.replicas OR a.forward_load_max != b.forward_load_max
   OR a.backward_load_max != b.backward_load_max
   OR a.bytes_forward_dispatch != b.bytes_forward_dispatch
   OR a.bytes_backward_dispatch != b.bytes_backward_dispatch
   OR a.bytes_replica_sync != b.bytes_replica_sync
   OR abs(a.modeled_seconds - b.modeled_seconds) > 1e-12 * a.modeled_seconds
   OR b.compaction_seconds IS NULL OR b.compaction_seconds <= 0))") == "0");
  CHECK(scalar(*store, R"(
SELECT count(*) FROM rank_memory a JOIN rank_memory b
  ON b.run = a.run + 3 AND b.step = a.step AND b.rank = a.rank
WHERE a.run <= 3 AND (a.replicas != b.replicas OR a.forward_tokens != b.forward_tokens
   OR a.backward_tokens != b.backward_tokens))") == "0");
  CHECK(scalar(*store, "SELECT count(*) FROM rank_memory WHERE run > 3") == "36");
}

TEST_CASE("a replay's mistakes are refused before anything is written", "[replay]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  auto error_of = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"replay", kTinyExperiment, "--db", db});
    const auto [code, output] = run_lrmoe(args, dir.file("replay.log"));
    CHECK(code == 1);
    return output;
  };
  CHECK_THAT(error_of({"--steps", "2"}), Contains("give one load source"));
  CHECK_THAT(error_of({"--skew", "zipf:x"}), Contains("--skew zipf:x: expected zipf:S"));
  CHECK_THAT(error_of({"--skew", "zipf:1", "--variant", "fastest"}),
             Contains("--variant fastest: not a policy bundle (fixed, symi, lrmoe)"));
  CHECK_THAT(
      error_of({"--skew", "zipf:1", "--variant", "x:policies.placement.lrmoe.keep_fraction=2"}),
      Contains("keep_fraction"));
  CHECK_THAT(error_of({"--loads-from", "7"}), Contains("no such file"));
  CHECK_THAT(error_of({"--skew", "zipf:1", "--set", "cluster.ranks=4", "--processes", "3"}),
             Contains("--processes 3: that many processes cannot share cluster.ranks = 4 evenly"));
  CHECK_FALSE(std::filesystem::exists(db));
}

namespace {

// Expert parameters 1 MiB; per pair 2 KiB in forward, 1 KiB saved until backward, 5 KiB in
// backward. Layer 0: 2 owned, 1 replica, 100 pairs forward, 40 kept; layer 1: 2 owned, 200
// forward, 100 kept.
constexpr lrmoe::MemoryCosts kGpuCosts{1 << 20, 2 << 10, 1 << 10, 5 << 10};
const std::vector<lrmoe::LayerHolding> kGpuLayers{{2, 1, 100, 40}, {2, 0, 200, 100}};
const lrmoe::StaticMemory kGpuStatic{3 << 20, 4 << 20};

}  // namespace

TEST_CASE("a timeline allocated on the CPU runs but has no allocator peak to report", "[replay]") {
  CHECK_FALSE(lrmoe::allocate_timeline(kGpuCosts, kGpuLayers, kGpuStatic, torch::kCPU));
}

TEST_CASE(
    "on a GPU the allocated timeline peaks at the model's total, within the allocator's "
    "rounding",
    "[gpu]") {
  const auto gpu = lrmoe::test::gpu_or_skip();
  if (!gpu) return;
  const auto peak = lrmoe::allocate_timeline(kGpuCosts, kGpuLayers, kGpuStatic, *gpu);
  REQUIRE(peak);
  CHECK(peak->modeled == lrmoe::pass_peak(kGpuCosts, kGpuLayers, kGpuStatic).at_peak.total());
  CHECK(peak->allocated >= peak->modeled);
  // The caching allocator rounds each block up to 512 bytes.
  CHECK(peak->allocated - peak->modeled <= 512 * peak->buffers);
}

TEST_CASE(
    "bench-planning: the exact plan's arrays grow with the batch, the scalable plan's with "
    "the ranks",
    "[replay]") {
  TempFolder dir;
  const auto [code, output] =
      run_lrmoe({"bench-planning", kTinyExperiment, "--set", "policies.bundle=lrmoe", "--ranks",
                 "2,4", "--tokens-per-rank", "64,512"},
                dir.file("bench.log"));
  INFO(output);
  REQUIRE(code == 0);
  // Table rows: tokens/rank, ranks, exact recv, scalable recv, exact held, scalable held, ...
  std::map<std::pair<int, int>, std::vector<double>> rows;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream cells(line);
    int tokens = 0, ranks = 0;
    if (!(cells >> tokens >> ranks)) continue;
    std::vector<double> values;
    for (double value = 0; cells >> value;) values.push_back(value);
    rows[{tokens, ranks}] = values;
  }
  REQUIRE(rows.size() == 4);
  // From 64 tokens a rank on: at 8, LRMoE keeps every pair on 2 ranks, so the saved
  // pre-activations stay in place and the plan holds no counts for their move (Note [Context in
  // place]), less than at larger batches.
  for (const int ranks : {2, 4}) {
    const std::vector<double>& small = rows[{64, ranks}];
    const std::vector<double>& large = rows[{512, ranks}];
    REQUIRE(small.size() >= 4);
    CHECK(large[2] > 4 * small[2]);  // exact: every pair of the batch, on every rank
    CHECK(large[3] == small[3]);     // scalable: count matrices, whatever the batch
    CHECK(large[0] > 4 * small[0]);  // exact: the batch's pairs gathered
  }
  CHECK(rows[{64, 4}][3] > rows[{64, 2}][3]);  // scalable: matrices over ranks
}

TEST_CASE(
    "with more ranks than experts, an x-fixed budget holds one owned expert's share and lrmoe "
    "spreads the hot experts over the ranks that own none",
    "[replay]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  const auto replay = [&](const std::string& skew, const std::string& sweep) {
    return run_lrmoe({"replay", kTinyExperiment, "--skew", skew, "--set", "cluster.ranks=16",
                      "--set", "cluster.memory_per_rank=1.0x fixed", "--variant", "fixed",
                      "--variant", "lrmoe", "--steps", "1", "--db", db, "--record", sweep},
                     dir.file(sweep + ".log"));
  };
  // 8 experts on 16 ranks: ranks 0-7 own one each, ranks 8-15 none.
  const auto [uniform, uniform_output] = replay("zipf:0", "uniform");
  INFO(uniform_output);
  REQUIRE(uniform == 0);
  const auto [skewed, skewed_output] = replay("zipf:1", "skewed");
  INFO(skewed_output);
  REQUIRE(skewed == 0);

  const auto store = lrmoe::ResultsStore::open_read_only(db);
  const auto run_of = [&](const std::string& sweep, const std::string& bundle) {
    return scalar(*store, "SELECT run FROM sweep_results WHERE sweep = '" + sweep +
                              "' AND label = '" + bundle + "'");
  };
  const std::string fixed = run_of("uniform", "fixed");
  // At balanced load fixed ownership fits the budget made for it, on the owners alone.
  REQUIRE(!fixed.empty());
  CHECK(scalar(*store, "SELECT status FROM runs WHERE id = " + fixed) == "finished");
  CHECK(scalar(*store, "SELECT count(*) FROM rank_memory WHERE run = " + fixed +
                           " AND rank < 8 AND owned > 0 AND forward_tokens > 0") == "8");
  CHECK(scalar(*store, "SELECT count(*) FROM rank_memory WHERE run = " + fixed +
                           " AND rank >= 8 AND (owned + replicas + forward_tokens) > 0") == "0");
  // Under skew the hot experts' forward alone outgrows one rank: fixed ownership fails, and
  // lrmoe's replicas go to the ranks beyond the experts.
  CHECK(scalar(*store,
               "SELECT status FROM sweep_results WHERE sweep = 'skewed' AND label = "
               "'fixed'") == "failed");
  const std::string lrmoe = run_of("skewed", "lrmoe");
  REQUIRE(!lrmoe.empty());
  CHECK(scalar(*store, "SELECT status FROM runs WHERE id = " + lrmoe) == "finished");
  CHECK(std::stoi(scalar(*store, "SELECT count(*) FROM rank_memory WHERE run = " + lrmoe +
                                     " AND rank >= 8 AND replicas > 0")) > 0);
}

TEST_CASE(
    "Ctrl-C stops a replay at its next step, recorded as stopped, and starts no other variant",
    "[replay][e2e]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  lrmoe_test::ChildProcess replay(
      {LRMOE_BINARY, "replay", kTinyExperiment, "--skew", "zipf:1.0", "--steps", "1000000", "--db",
       db, "--record", "long", "--variant", "fixed", "--variant", "lrmoe:policies.bundle=lrmoe"},
      dir.file("replay.log"));
  // Wait until the first variant has recorded steps, then interrupt.
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    try {
      if (std::filesystem::exists(db) &&
          std::stoll(scalar(*lrmoe::ResultsStore::open_read_only(db),
                            "SELECT count(*) FROM moe_layer_steps")) > 0)
        break;
    } catch (const lrmoe::StoreError&) {
      // the database is being created
    }
  }
  replay.signal(SIGINT);
  const int code = replay.wait(std::chrono::seconds(60));
  INFO(replay.output());
  CHECK(code == 130);
  CHECK_THAT(replay.output(), Contains("stopped by Ctrl-C: 1 of 2 variants replayed"));
  CHECK(scalar(*lrmoe::ResultsStore::open_read_only(db), "SELECT group_concat(status) FROM runs") ==
        "stopped");
}
