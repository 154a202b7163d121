// lrmoe compare: medians and ranges over seeds with censored (not reached) runs, the bootstrap
// reduction against a baseline, the comparison of recorded runs in each output format, and what
// --plot hands its figures' script.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "runner/compare_command.hpp"
#include "runner/headline_projection.hpp"
#include "runner/seed_statistics.hpp"
#include "runner/significant_digits.hpp"
#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/store_samples.hpp"
#include "support/temp_folder.hpp"
#include "support/text_file.hpp"

using Catch::Matchers::Contains;
using lrmoe_test::read_text;
using lrmoe_test::TempFolder;

namespace {

constexpr double kNotReached = std::numeric_limits<double>::infinity();

// A finished run of a sweep cell with `seed`: `steps` to the target (none: not reached), its
// MoE critical path twice the steps in milliseconds, modeled time the steps in microseconds.
void record_run(lrmoe::ResultsStore& store, const lrmoe::SweepCellTag& cell, uint64_t seed,
                std::optional<int64_t> steps) {
  lrmoe::RunInfo info = lrmoe_test::sample_run("cell");
  info.resolved_toml = "[model]\npreset = \"tiny-moe\"\n";
  info.seed = seed;
  info.sweep_cell = cell;
  const int64_t run = store.begin_run(info);
  std::optional<lrmoe::TimeToTarget> reached;
  if (steps) {
    const auto s = static_cast<double>(*steps);
    reached = lrmoe::TimeToTarget{*steps, s, s / 500, s / 1e6, s / 500};
  }
  store.finish_run(run, "finished", reached);
}

// A sweep "policies" of `bundles` over seeds 1 to 3, in that order.
lrmoe::SweepRecord bundles_over_seeds(const std::vector<std::string>& bundles) {
  lrmoe::SweepRecord sweep{"policies", "policies.toml", {}, lrmoe::SweepKind::Train};
  for (const std::string& bundle : bundles) {
    for (const std::string seed : {"1", "2", "3"}) {
      sweep.cells.push_back({"b=" + bundle + " s=" + seed,
                             bundle + seed,
                             "h",
                             {{"policies.bundle", bundle}, {"experiment.seed", seed}},
                             "",
                             ""});
    }
  }
  return sweep;
}

std::string compare(const std::string& db, const std::string& format,
                    std::optional<std::string> baseline = std::nullopt,
                    std::vector<std::string> sweeps = {"policies"}, std::vector<int64_t> runs = {},
                    std::ostream& notes = std::cerr) {
  lrmoe::CompareOptions options;
  options.sweeps = std::move(sweeps);
  options.runs = std::move(runs);
  options.database = db;
  options.format = format;
  options.baseline = std::move(baseline);
  std::ostringstream out;
  lrmoe::compare_command(options, out, notes);
  return out.str();
}

}  // namespace

TEST_CASE(
    "over seeds the median holds while fewer than half missed the target, the range shows "
    "any miss",
    "[compare]") {
  const lrmoe::SeedSpread three = lrmoe::seed_spread({30, 10, kNotReached});
  CHECK(three.median == 30);
  CHECK(three.low == 10);
  CHECK(std::isinf(three.high));
  CHECK(lrmoe::seed_spread({10, 20}).median == 15);
  CHECK(std::isinf(lrmoe::seed_spread({10, kNotReached, kNotReached}).median));
}

TEST_CASE(
    "a reduction against the baseline is 1 - the ratio of medians, with a seeded bootstrap "
    "interval around it",
    "[compare]") {
  const auto half = lrmoe::bootstrap_reduction({50, 50, 50}, {100, 100, 100});
  REQUIRE(half);
  CHECK(half->estimate == Approx(0.5));
  CHECK(half->low == Approx(0.5));  // no spread, no uncertainty
  CHECK(half->high == Approx(0.5));

  const std::vector<double> variant{40, 55, 60, 70}, baseline{90, 100, 110, 130};
  const auto first = lrmoe::bootstrap_reduction(variant, baseline);
  const auto again = lrmoe::bootstrap_reduction(variant, baseline);
  REQUIRE(first);
  CHECK(first->estimate == Approx(1 - 57.5 / 105));
  CHECK(first->low < first->estimate);
  CHECK(first->high > first->estimate);
  CHECK(first->low == again->low);  // seeded: the same runs, the same interval
  CHECK(first->high == again->high);

  CHECK_FALSE(lrmoe::bootstrap_reduction({1}, {kNotReached, kNotReached}));  // no baseline figure
  CHECK_FALSE(lrmoe::bootstrap_reduction({}, {1}));
}

TEST_CASE("lrmoe compare groups a sweep's runs by variant over seeds and shows missed targets",
          "[compare][store]") {
  TempFolder dir;
  const std::string db = dir.file("c.db");
  {
    auto store = lrmoe::ResultsStore::open(db);
    const lrmoe::SweepCellNumbers numbers =
        store->record_sweep(bundles_over_seeds({"fixed", "lrmoe"}));
    // fixed: 100, 120, 140 steps; lrmoe: 60, 80 and one that never reached the target.
    const std::vector<std::optional<int64_t>> steps{100, 120, 140, 60, 80, std::nullopt};
    for (std::size_t i = 0; i < steps.size(); ++i)
      record_run(*store, {numbers.sweep, numbers.cells[i]}, i % 3 + 1, steps[i]);
  }

  const std::string table = compare(db, "table", "bundle=fixed");
  CHECK_THAT(table, Contains("tiny-moe  bundle=fixed     3        3  120 [100–140]"));
  CHECK_THAT(table, Contains("tiny-moe  bundle=lrmoe     3        2  80 [60–∞]"));
  CHECK_THAT(table, Contains("+33% ["));  // 1 - 80 / 120

  const std::string csv = compare(db, "csv", "bundle=fixed");
  CHECK_THAT(csv, Contains("model,variant,runs,reached,steps_to_target_median,"));
  CHECK_THAT(csv, Contains("tiny-moe,bundle=lrmoe,3,2,80.00,60.00,inf,0.160"));
  CHECK_THAT(csv, Contains(",0.3333,"));

  const std::string json = compare(db, "json");
  CHECK_THAT(json, Contains("\"variant\": \"bundle=lrmoe\", \"runs\": 3, \"reached_target\": 2, "
                            "\"run_ids\": [4, 5, 6], \"seeds\": [1, 2, 3], "
                            "\"steps_to_target\": {\"median\": 80.00, \"min\": 60.00, \"max\": "
                            "null}"));

  CHECK_THAT(compare(db, "markdown"),
             Contains("| tiny-moe | bundle=fixed | 3 | 3 | 120 [100–140] |"));

  CHECK_THROWS_WITH(compare(db, "table", "bundle=fxed"),
                    Contains("--baseline bundle=fxed: no variant of that name; the variants: "
                             "'bundle=fixed', 'bundle=lrmoe'"));
  CHECK_THROWS_WITH(compare(db, "yaml"),
                    Contains("--format yaml: use table, csv, json or markdown"));
}

TEST_CASE(
    "runs of several sweeps pool by variant, so controls compare against a baseline from "
    "another sweep, a run named twice counts once and one still running is left out",
    "[compare][store]") {
  TempFolder dir;
  const std::string db = dir.file("c.db");
  {
    auto store = lrmoe::ResultsStore::open(db);
    // One sweep per call, a cell per seed from `first_seed`, its run finished at `steps` or,
    // without steps, still running.
    const auto record = [&](const std::string& name,
                            const std::vector<std::pair<std::string, std::string>>& change,
                            int first_seed, const std::vector<std::optional<int64_t>>& steps) {
      lrmoe::SweepRecord sweep{name, name + ".toml", {}, lrmoe::SweepKind::Train};
      for (std::size_t i = 0; i < steps.size(); ++i) {
        const std::string seed = std::to_string(first_seed + static_cast<int>(i));
        std::vector<std::pair<std::string, std::string>> values = change;
        values.emplace_back("experiment.seed", seed);
        sweep.cells.push_back({name + seed, name + seed, "h", values, "", ""});
      }
      const lrmoe::SweepCellNumbers numbers = store->record_sweep(sweep);
      for (std::size_t i = 0; i < steps.size(); ++i) {
        const lrmoe::SweepCellTag cell{numbers.sweep, numbers.cells[i]};
        if (steps[i]) {
          record_run(*store, cell, static_cast<uint64_t>(first_seed) + i, steps[i]);
          continue;
        }
        lrmoe::RunInfo info = lrmoe_test::sample_run("late");
        info.resolved_toml = "[model]\npreset = \"tiny-moe\"\n";
        info.sweep_cell = cell;
        CHECK(store->begin_run(info) == 7);
      }
    };
    // The reproduction holds the default arm, the controls sweep only the changed ones.
    const std::vector<std::pair<std::string, std::string>> random{
        {"policies.bundle", "lrmoe"}, {"policies.metric.name", "random"}};
    record("reproduction", {{"policies.bundle", "lrmoe"}}, 1, {100, 110, 120});
    record("controls", random, 1, {150, 160, 170});
    // A fourth seed of the control, still training: not a miss.
    record("late", random, 4, {std::nullopt});
  }

  const std::string both =
      compare(db, "table", "bundle=lrmoe", {"reproduction", "controls", "late"}, {1});
  CHECK_THAT(both, Contains("tiny-moe  bundle=lrmoe                  3        3  110 [100–120]"));
  CHECK_THAT(both, Contains("tiny-moe  bundle=lrmoe, name=random     3        3  160 [150–170]"));
  CHECK_THAT(both, Contains("-45% ["));  // 1 - 160 / 110
  CHECK_THAT(both, Contains("left out, not finished: run 7 (running)"));
  CHECK_THAT(compare(db, "markdown", std::nullopt, {"controls", "late"}),
             Contains("left out, not finished: run 7 (running)"));
  std::ostringstream notes;
  CHECK_THAT(compare(db, "csv", std::nullopt, {"controls", "late"}, {}, notes),
             !Contains("left out"));
  CHECK_THAT(notes.str(), Contains("left out, not finished: run 7 (running)"));

  CHECK_THROWS_WITH(compare(db, "table", "bundle=lrmoe", {"controls"}),
                    Contains("--baseline bundle=lrmoe: no variant of that name"));
}

TEST_CASE("compare's list of differing settings leaves out the parameters of plugins that differ",
          "[compare][store]") {
  TempFolder dir;
  const std::string db = dir.file("c.db");
  {
    auto store = lrmoe::ResultsStore::open(db);
    const auto record = [&](const std::string& placement, const std::string& parameters) {
      lrmoe::RunInfo info = lrmoe_test::sample_run("run");
      info.resolved_toml =
          "[model]\npreset = \"tiny-moe\"\n[policies.placement]\nname = \"" + placement + "\"\n";
      info.policies = placement + "/gate/keep_all/owner";
      const int64_t run = store->begin_run(info);
      store->add_plugins(run, {{"placement", placement, "1.0.0", parameters, "lib.so", "ab"}});
      store->finish_run(run, "finished", std::nullopt);
    };
    record("lrmoe", "keep_fraction = 1.0\nmax_replicas = 4\n");
    record("symi", "capacity_factor = 1.0\n");
  }
  const std::string table = compare(db, "table", std::nullopt, {}, {1, 2});
  CHECK_THAT(table, Contains("the variants of tiny-moe differ in: policies.placement.name (and the "
                             "parameters of the plugins that differ)\n"));
  // Runs given by id go by their policies; their placement alone names one as the baseline.
  CHECK_THAT(compare(db, "table", "symi", {}, {1, 2}), Contains("reduction: steps to target"));
  CHECK_THROWS_WITH(compare(db, "table", "gate", {}, {1, 2}),
                    Contains("--baseline gate: no variant of that name"));
}

TEST_CASE(
    "compare never pools runs whose plugin parameters differ: each is its own variant, named by "
    "the setting that tells it apart, with the differing settings listed and few seeds flagged",
    "[compare][store]") {
  TempFolder dir;
  const std::string db = dir.file("c.db");
  {
    auto store = lrmoe::ResultsStore::open(db);
    // Runs outside a sweep, all named by their policies: keep_fraction 1.0 on seeds 1-3,
    // 0.25 on seeds 1-2, and 1.0 again on seed 3 (a repeat).
    const auto record = [&](uint64_t seed, const std::string& keep, std::optional<int64_t> steps) {
      lrmoe::RunInfo info = lrmoe_test::sample_run("run");
      info.resolved_toml =
          "[model]\npreset = \"tiny-moe\"\n[experiment]\nseed = " + std::to_string(seed) + "\n";
      info.seed = seed;
      info.policies = "lrmoe/grad_contribution/quota_topk/capacity_aware";
      const int64_t run = store->begin_run(info);
      store->add_plugins(run, {{"placement", "lrmoe", "4.0.0", "keep_fraction = " + keep + "\n",
                                "liblrmoe.so", "ab"}});
      std::optional<lrmoe::TimeToTarget> reached;
      if (steps) {
        const auto s = static_cast<double>(*steps);
        reached = lrmoe::TimeToTarget{*steps, s, s / 500, s / 1e6, s / 500};
      }
      store->finish_run(run, "finished", reached);
    };
    record(1, "1.0", 100);
    record(2, "1.0", 110);
    record(3, "1.0", 120);
    record(1, "0.25", 300);
    record(2, "0.25", 320);
    record(3, "1.0", 130);
    record(1, "0.1", std::nullopt);  // never reached: no reduction to print in JSON
  }
  const std::string table =
      compare(db, "table", "lrmoe/grad_contribution/quota_topk/capacity_aware (keep_fraction=1.0)",
              {}, {1, 2, 3, 4, 5, 6});
  CHECK_THAT(table, Contains("lrmoe/grad_contribution/quota_topk/capacity_aware "
                             "(keep_fraction=1.0)   4 (seeds repeat)"));
  CHECK_THAT(table, Contains("lrmoe/grad_contribution/quota_topk/capacity_aware "
                             "(keep_fraction=0.25)  2 "));
  CHECK_THAT(table, Contains("(2 seeds)"));
  CHECK_THAT(table, Contains("the variants of tiny-moe differ in: "
                             "policies.placement.lrmoe.keep_fraction"));
  CHECK_THAT(table, Contains("seeds repeat: runs of one configuration with the same seed"));
  const std::string json =
      compare(db, "json", "lrmoe/grad_contribution/quota_topk/capacity_aware (keep_fraction=1.0)",
              {}, {1, 2, 3, 4, 5, 6, 7});
  CHECK_THAT(json, Contains("\"reduction\": null, \"reduction_low\": null") && !Contains("inf"));

  // Figures beyond the default ones, by name; an unknown one is refused with the names.
  lrmoe::CompareOptions options;
  options.runs = {1, 2, 3};
  options.database = db;
  options.columns = {"steps_to_target", "forward_imbalance"};
  std::ostringstream out;
  lrmoe::compare_command(options, out, std::cerr);
  CHECK_THAT(out.str(), Contains("fwd imbalance") && !Contains("peak subtotal MiB"));
  options.columns = {"imbalance"};
  CHECK_THROWS_WITH(lrmoe::compare_command(options, out, std::cerr),
                    Contains("--columns imbalance: no such figure; the figures: steps_to_target,"));
}

TEST_CASE("numbers for people keep three significant digits, whatever their magnitude",
          "[compare]") {
  CHECK(lrmoe::significant_text(0.000123456, 3) == "0.000123");
  CHECK(lrmoe::significant_text(67.587, 3) == "67.6");
  CHECK(lrmoe::significant_text(1218.6, 3) == "1219");
  CHECK(lrmoe::significant_text(1200, 3) == "1200");
  CHECK(lrmoe::significant_text(-0.5, 3) == "-0.500");
  CHECK(lrmoe::significant_text(std::numeric_limits<double>::infinity(), 3) == "∞");
}

namespace {

// Run `run`'s projection at `ranks` and otherwise compare's headline configuration.
lrmoe::ProjectionRecord projection_at(int64_t run, int64_t ranks) {
  lrmoe::ProjectionRecord p;
  p.run = run;
  p.model = "full-moe";
  p.ranks = ranks;
  p.tokens_per_rank = lrmoe::kHeadlineTokens;
  p.profile = lrmoe::kHeadlineProfile;
  p.memory_per_rank = "1.0x fixed";
  p.sampled_steps = "10,20";
  return p;
}

// A sweep "policies" of three bundles over three seeds: fixed reaches the target in 100, 120 and
// 140 steps, lrmoe in 60, 80 and never, symi once in three (its median never). Each run but
// those `unprojected` has a projection at compare's headline configuration
// (runner/headline_projection.hpp) of 0.5 s per step, and every run one at another size, which
// is never the one drawn.
std::string record_projected_sweep(TempFolder& dir, const std::vector<int64_t>& unprojected = {}) {
  const std::string db = dir.file("plot.db");
  auto store = lrmoe::ResultsStore::open(db);
  const lrmoe::SweepCellNumbers numbers =
      store->record_sweep(bundles_over_seeds({"fixed", "lrmoe", "symi"}));
  const std::vector<std::optional<int64_t>> steps{100,          120,          140,          60, 80,
                                                  std::nullopt, std::nullopt, std::nullopt, 90};
  for (std::size_t i = 0; i < steps.size(); ++i) {
    record_run(*store, {numbers.sweep, numbers.cells[i]}, i % 3 + 1, steps[i]);
    const auto run = static_cast<int64_t>(i + 1);
    const bool headline =
        std::find(unprojected.begin(), unprojected.end(), run) == unprojected.end();
    for (const int64_t ranks : {headline ? lrmoe::kHeadlineRanks : int64_t{32}, int64_t{64}}) {
      lrmoe::ProjectionRecord p = projection_at(run, ranks);
      p.steps = steps[i].value_or(200);
      p.reached = steps[i].has_value();
      p.compute_seconds = 0.125;
      p.all_to_all_seconds = 0.25;
      p.gather_seconds = 0.0625;
      p.transfer_seconds = 0.0625;
      p.projected_seconds = 0.5 * static_cast<double>(p.steps);
      store->add_projection(p);
    }
  }
  return db;
}

// lrmoe compare with LRMOE_PYTHON=true: comparison.json is written and no figure drawn, so no
// matplotlib is needed. {exit code, output}.
std::pair<int, std::string> compare_plot(TempFolder& dir, const std::vector<std::string>& args) {
  std::vector<std::string> command{"/usr/bin/env", "LRMOE_PYTHON=true", LRMOE_BINARY, "compare"};
  command.insert(command.end(), args.begin(), args.end());
  lrmoe_test::ChildProcess child(command, dir.file("compare.log"));
  const int code = child.wait(std::chrono::seconds(60));
  return {code, child.output()};
}

// The reduction of `figure` for `variant` in lrmoe compare --format json's output, written as
// the figures' spec writes one: {"estimate": ..., "low": ..., "high": ...}, null for infinite.
std::string reduction_in_json(const std::string& json, const std::string& variant,
                              const std::string& figure) {
  const std::string number = "(null|[-0-9.]+)";
  const std::regex pattern(
      "\"variant\": \"" + variant + "\".*\"" + figure + "\": \\{[^}]*\"reduction\": " + number +
      ", \"reduction_low\": " + number + ", \"reduction_high\": " + number + "\\}");
  std::smatch found;
  REQUIRE(std::regex_search(json, found, pattern));
  const auto spec = [&](int i) { return found[i].str(); };
  return "{\"estimate\": " + spec(1) + ", \"low\": " + spec(2) + ", \"high\": " + spec(3) + "}";
}

}  // namespace

TEST_CASE(
    "lrmoe compare --plot hands its figures the reductions it prints, of the time to target "
    "along --x, and with --x projected each run's projected seconds per step",
    "[compare][store][e2e]") {
  TempFolder dir;
  const std::string db = record_projected_sweep(dir);
  const std::string json = compare(db, "json", "bundle=fixed");
  const std::vector<std::pair<std::string, std::string>> axes{
      {"steps", "steps_to_target"},
      {"critical", "moe_critical_seconds_to_target"},
      {"modeled", "moe_modeled_seconds_to_target"},
      {"projected", "projected_moe_seconds_to_target"}};
  for (const auto& [axis, figure] : axes) {
    INFO(axis);
    const auto figures = dir.path() / axis;
    const auto [code, output] =
        compare_plot(dir, {"--sweep", "policies", "--db", db, "--baseline", "bundle=fixed",
                           "--plot", figures.string(), "--x", axis});
    INFO(output);
    REQUIRE(code == 0);
    const std::string spec = read_text(figures / "comparison.json");
    CHECK_THAT(spec, Contains("{\"name\": \"policies\", \"x\": \"" + axis +
                              "\", \"baseline\": \"bundle=fixed\""));
    CHECK_THAT(spec, Contains("\"name\": \"bundle=lrmoe\", \"runs\": [4, 5, 6], \"reached\": 2, "
                              "\"reduction\": " +
                              reduction_in_json(json, "bundle=lrmoe", figure)));
    // The baseline has no reduction of its own; a median that never reached the target has no
    // number (lrmoe compare prints -inf), and the figure says "not reached".
    CHECK_THAT(spec, Contains("\"name\": \"bundle=fixed\", \"runs\": [1, 2, 3], \"reached\": 3, "
                              "\"reduction\": null"));
    CHECK_THAT(spec, Contains("\"name\": \"bundle=symi\", \"runs\": [7, 8, 9], \"reached\": 1, "
                              "\"reduction\": {\"estimate\": null, "));
    CHECK((spec.find("projected_seconds_per_step") != std::string::npos) == (axis == "projected"));
  }
  CHECK_THAT(read_text(dir.path() / "projected" / "comparison.json"),
             Contains("\"projection\": \"full-moe, 16 ranks x 4096 tokens/rank, "
                      "h100-sxm-8gpu-ib400\", \"projected_seconds_per_step\": [0.5, 0.5, 0.5]"));
}

TEST_CASE(
    "lrmoe compare --plot --x projected leaves out a run whose plans do not fit at full size, "
    "and refuses runs without a projection, naming them and the lrmoe project command",
    "[compare][store][e2e]") {
  TempFolder dir;
  const auto figures = dir.path() / "figures";
  SECTION("a run whose plans do not fit") {
    const std::string db = record_projected_sweep(dir);
    lrmoe::ProjectionRecord does_not_fit = projection_at(2, lrmoe::kHeadlineRanks);
    does_not_fit.failed = "layer 0: rank 3 holds 9 GiB of 8";
    lrmoe::ResultsStore::open(db)->add_projection(does_not_fit);  // in place of run 2's
    const auto [code, output] = compare_plot(
        dir, {"--sweep", "policies", "--db", db, "--plot", figures.string(), "--x", "projected"});
    INFO(output);
    REQUIRE(code == 0);
    CHECK_THAT(output,
               Contains("compare --plot --x projected: run 2 left out: its plans do not fit at "
                        "full-moe, 16 ranks x 4096 tokens/rank, h100-sxm-8gpu-ib400: layer 0: "
                        "rank 3 holds 9 GiB of 8\n"));
    CHECK_THAT(read_text(figures / "comparison.json"),
               Contains("\"projected_seconds_per_step\": [0.5, null, 0.5]"));
  }
  SECTION("runs without a projection at the headline configuration") {
    const std::string db = record_projected_sweep(dir, {5, 7});
    const auto [code, output] = compare_plot(
        dir, {"--sweep", "policies", "--db", db, "--plot", figures.string(), "--x", "projected"});
    CHECK(code != 0);
    CHECK(output ==
          "lrmoe: compare --plot --x projected: runs 5, 7 have no projection at 16 ranks x 4096 "
          "tokens/rank, h100-sxm-8gpu-ib400; make them with: lrmoe project 5 7 --db " +
              db + " --ranks 16 --tokens-per-rank 4096 --profile h100-sxm-8gpu-ib400\n");
    CHECK_FALSE(std::filesystem::exists(figures));  // nothing half drawn
  }
}

TEST_CASE("lrmoe compare --x: one line naming the axes it takes, and only with --plot",
          "[compare][store][e2e]") {
  TempFolder dir;
  const std::string db = record_projected_sweep(dir);
  const auto [code, output] = compare_plot(
      dir, {"--sweep", "policies", "--db", db, "--plot", dir.file("figures"), "--x", "sideways"});
  CHECK(code != 0);
  CHECK(output == "lrmoe: --x sideways: use steps, critical, modeled or projected\n");
  const auto [alone, alone_output] =
      compare_plot(dir, {"--sweep", "policies", "--db", db, "--x", "steps"});
  CHECK(alone != 0);
  CHECK_THAT(alone_output, Contains("--x requires --plot"));
}
