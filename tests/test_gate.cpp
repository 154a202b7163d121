// The sensitivity gate (lrmoe gate, Note [Sensitivity gate]): its capacity calibration, and the
// command end to end on the tiny model.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "runner/capacity_calibration.hpp"
#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/temp_folder.hpp"
#include "support/text_file.hpp"

using Catch::Contains;

TEST_CASE("the calibrated capacity factor drops the asked fraction of the recorded pairs",
          "[gate]") {
  // Two passes of four experts, 40 pairs each: mean 10 pairs per expert.
  const std::vector<lrmoe::PassLoads> passes{{20, 10, 6, 4}, {10, 10, 10, 10}};
  // Factor 1: capacity 10 drops 10 of the first pass's pairs and none of the second's.
  CHECK(lrmoe::dropped_fraction(passes, 1.0) == Approx(10.0 / 80));
  CHECK(lrmoe::dropped_fraction(passes, 0.0) == 1.0);
  // Factor 0.5: capacity 5 drops 15 + 5 + 1 and 4 x 5: 41 of 80.
  CHECK(lrmoe::dropped_fraction(passes, 0.5) == Approx(41.0 / 80));
  const double half = lrmoe::capacity_factor_dropping(passes, 0.5);
  CHECK(lrmoe::dropped_fraction(passes, half) <= 0.5);
  CHECK(lrmoe::dropped_fraction(passes, half - 1e-3) > 0.5);
  // Nothing is dropped once ceil(10 * factor) reaches the largest load, 20: just above 1.9.
  CHECK(lrmoe::capacity_factor_dropping(passes, 0.0) == Approx(1.9).margin(1e-3));
}

TEST_CASE("lrmoe gate trains its six arms over seeds, resumably, and gives a verdict",
          "[gate][e2e]") {
  lrmoe_test::TempFolder dir;
  const std::string db = dir.file("gate.db");
  const std::vector<std::string> args{
      "gate",    std::string(LRMOE_SOURCE_DIR) + "/experiments/tiny-moe.toml",
      "--seeds", "3",
      "--db",    db,
      "--set",   "train.max_steps=30",
      "--set",   "train.target_loss=4.5"};
  const auto [code, output] = lrmoe_test::run_lrmoe(args, dir.file("gate.log"));
  INFO(output);
  // Every arm reaches so loose a target at about the same step: the gate fails.
  CHECK(code == 3);
  CHECK_THAT(output, Contains("dropless") && Contains("dense, the MoE's active width") &&
                         Contains("MoE removed") && Contains("100.0%") &&
                         Contains("50% backward work kept at random") &&
                         Contains("dropped, lowest gates") && Contains("dropped at random") &&
                         Contains("break-even") && Contains("FAIL:"));
  // The sweep files lie beside the database, whatever folder the command ran in.
  CHECK(std::filesystem::exists(dir.file("gate-sweeps/gate-tiny-moe.toml")));
  const auto store = lrmoe::ResultsStore::open_read_only(db);
  // The dense arm ran a model with no MoE layer; the backward arm kept about half the pairs.
  CHECK(store
            ->query("SELECT count(*) FROM runs r WHERE status = 'finished' AND NOT EXISTS "
                    "(SELECT 1 FROM moe_layer_steps m WHERE m.run = r.id)")
            .rows.at(0)
            .at(0)
            .value() == "3");
  const auto runs = store->query("SELECT count(*) FROM runs WHERE status = 'finished'");
  CHECK(runs.rows.at(0).at(0).value() == "18");
  // Run again: every cell is found finished, nothing trains again.
  const auto [again, second] = lrmoe_test::run_lrmoe(args, dir.file("gate-again.log"));
  CHECK(again == 3);
  CHECK_THAT(second,
             Contains("12 finished before, 0 to run") && Contains("6 finished before, 0 to run"));
  CHECK(store->query("SELECT count(*) FROM runs").rows.at(0).at(0).value() == "18");
}

TEST_CASE(
    "lrmoe positive-control trains SYMI against fixed ownership at capacity factor 1.0 "
    "under one budget at the published or the workload's operating point, and says when SYMI "
    "placed no replica",
    "[gate][e2e]") {
  lrmoe_test::TempFolder dir;
  const std::string db = dir.file("control.db");
  const auto control = [&](const std::string& budget, const std::string& log,
                           std::vector<std::string> more) {
    std::vector<std::string> args = {"positive-control",
                                     std::string(LRMOE_SOURCE_DIR) + "/experiments/tiny-moe.toml",
                                     "--seeds",
                                     "3",
                                     "--db",
                                     db,
                                     "--budget",
                                     budget,
                                     "--set",
                                     "train.max_steps=40",
                                     "--set",
                                     "cluster.ranks=4",
                                     "--set",
                                     "cluster.slots_per_rank=4"};
    args.insert(args.end(), more.begin(), more.end());
    return lrmoe_test::run_lrmoe(args, dir.file(log));
  };
  // Room beyond one slot per owned expert: SYMI places replicas, and the verdict follows the
  // steps (either way on so short a run). By default at SYMI's published operating point.
  const auto [code, output] = control("1.2x fixed", "roomy.log", {});
  INFO(output);
  CHECK((code == 0 || code == 3));
  CHECK_THAT(output, Contains("fixed ownership, capacity factor 1.0") &&
                         Contains("SYMI as published") && Contains("replicas per layer") &&
                         Contains("SYMI's published operating point"));
  CHECK_THAT(output, !Contains("placed no replica"));
  // Under "1.0x fixed", with its optimizer state on the device (the harness's variant), SYMI fits
  // one slot per owned expert: no replica, no test of it.
  const auto [tight, tight_output] =
      control("1.0x fixed", "tight.log",
              {"--operating-point", "workload", "--set", "policies.optimizer_state=device"});
  INFO(tight_output);
  CHECK(tight == 3);
  CHECK_THAT(tight_output, Contains("SYMI placed no replica under \"1.0x fixed\"") &&
                               Contains("DOES NOT REPRODUCE") &&
                               Contains("the workload's operating point"));
  // Each budget and operating point is its own sweep beside the database; the published point
  // trains both arms at SYMI's auxiliary loss and drops at random, the workload's by lowest gate.
  const std::string published = lrmoe_test::read_text(
      dir.file("control-sweeps/positive-control-tiny-moe-1.2x-fixed-published.toml"));
  CHECK_THAT(published, Contains("model.aux_loss_coef=1e-5") &&
                            Contains(R"("policies.placement.symi.drop" = "random")") &&
                            Contains(R"("policies.placement.fixed_ownership.drop" = "random")"));
  const std::string workload =
      lrmoe_test::read_text(dir.file("control-sweeps/positive-control-tiny-moe-1.0x-fixed.toml"));
  CHECK_THAT(workload, !Contains("aux_loss_coef") &&
                           Contains(R"("policies.placement.symi.drop" = "lowest_gate")"));
}
