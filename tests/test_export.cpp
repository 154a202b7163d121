// lrmoe export: a run's per-step figures as CSV and as TensorBoard event files, the latter read
// back by TensorBoard's own reader (scripts/setup.sh installs it in .tools/tensorboard), and its
// routing as per-expert loads, read back as replay reads them.

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "core/replay/expert_load_csv.hpp"
#include "runner/tensorboard_events.hpp"
#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/store_samples.hpp"
#include "support/temp_folder.hpp"

using Catch::Matchers::Contains;
using lrmoe_test::run_lrmoe;
using lrmoe_test::TempFolder;

namespace {

// Run 1 of `db`: 20 steps, evaluated every 5th, with two MoE layers a step (blocks 1 and 3),
// whose three experts take step, 2 x block and 5 pairs.
void record_sample_run(const std::string& db) {
  auto store = lrmoe::ResultsStore::open(db);
  lrmoe::RunInfo info = lrmoe_test::sample_run("export-me");
  const int64_t run = store->begin_run(info);
  for (int64_t step = 1; step <= 20; ++step) {
    store->add_step(run,
                    lrmoe_test::sample_step(
                        step, step % 5 == 0 ? std::optional(3.0 - 0.05 * step) : std::nullopt));
    for (int64_t layer = 0; layer < 2; ++layer)
      store->add_layer_step(run, lrmoe_test::sample_layer_step(step, layer));
    for (const int64_t block : {1, 3})
      store->add_expert_load(run, step, block, {step, 2 * block, 5});
  }
  store->finish_run(run, "finished", std::nullopt);
}

std::string text_of(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("TFRecord's checksum is CRC-32C", "[export]") {
  CHECK(lrmoe::crc32c("123456789") == 0xE3069283u);  // the standard check value
  CHECK(lrmoe::crc32c("") == 0u);
}

TEST_CASE("lrmoe export writes a run's figures as CSV, a row per step", "[export][e2e]") {
  TempFolder dir;
  const std::string db = dir.file("r.db");
  record_sample_run(db);
  const auto [code, output] = run_lrmoe(
      {"export", "1", "--db", db, "--format", "csv", "--out", dir.file("csv")}, dir.file("o.log"));
  INFO(output);
  REQUIRE(code == 0);
  CHECK_THAT(output, Contains("run 1: 11 figures over 20 steps in"));
  const std::string csv = text_of(dir.path() / "csv" / "run-1-export-me.csv");
  CHECK_THAT(csv, Contains("step,loss/train,loss/eval,optimizer/lr,optimizer/grad_norm,"));
  CHECK_THAT(csv, Contains("pairs/dropped_forward_fraction,pairs/kept_backward_fraction,"
                           "moe/replicas_per_layer"));
  // Step 4 has no evaluation, step 5 one; 3 of 100 pairs dropped, 90 kept, 2 replicas a layer.
  CHECK_THAT(csv, Contains("\n4,9.96,,0.0003,1.25,"));
  CHECK_THAT(csv, Contains("\n5,9.95,2.75,0.0003,1.25,") && Contains(",0.03,0.9,2\n"));

  const auto [refused, refused_output] =
      run_lrmoe({"export", "1", "--db", db, "--format", "parquet"}, dir.file("p.log"));
  CHECK(refused == 1);
  CHECK_THAT(refused_output,
             Contains("export: --format parquet: use tensorboard, csv or expert-loads"));
}

TEST_CASE("lrmoe export writes a run's routing as per-expert loads that replay reads back",
          "[export][e2e]") {
  TempFolder dir;
  const std::string db = dir.file("r.db");
  record_sample_run(db);
  const auto [code, output] =
      run_lrmoe({"export", "1", "--db", db, "--format", "expert-loads", "--out", dir.file("loads")},
                dir.file("o.log"));
  INFO(output);
  REQUIRE(code == 0);
  const std::string file = (dir.path() / "loads" / "run-1-export-me-expert-loads.csv").string();
  CHECK_THAT(output, Contains("run 1: per-expert loads in " + file));
  const lrmoe::RecordedExpertLoads loads = lrmoe::read_expert_load_csv(file);
  REQUIRE(loads.steps.size() == 20);
  CHECK(loads.steps.back() == 20);
  using Layers = std::vector<std::vector<int64_t>>;
  CHECK(loads.pairs[6] == Layers{{7, 2, 5}, {7, 6, 5}});
}

TEST_CASE(
    "lrmoe export's TensorBoard files hold every figure of every step, as TensorBoard reads "
    "them",
    "[export][e2e]") {
  const std::string python = std::string(LRMOE_SOURCE_DIR) + "/.tools/tensorboard/bin/python";
  INFO("TensorBoard's reader is missing: bash scripts/setup.sh installs it in .tools/tensorboard");
  REQUIRE(std::filesystem::exists(python));
  TempFolder dir;
  const std::string db = dir.file("r.db");
  record_sample_run(db);
  const auto [code, output] =
      run_lrmoe({"export", "1", "--db", db, "--out", dir.file("tb")}, dir.file("o.log"));
  INFO(output);
  REQUIRE(code == 0);

  lrmoe_test::ChildProcess reader(
      {python, std::string(LRMOE_SOURCE_DIR) + "/tests/support/read_tensorboard_events.py",
       dir.file("tb/run-1-export-me")},
      dir.file("read.log"));
  REQUIRE(reader.wait(std::chrono::seconds(120)) == 0);
  // tag -> step -> value, as TensorBoard read them.
  std::map<std::string, std::map<int64_t, double>> read;
  std::istringstream lines(reader.output());
  std::string tag;
  int64_t step = 0;
  double value = 0, wall_time = 0;
  while (lines >> tag >> step >> value >> wall_time) read[tag][step] = value;
  INFO(reader.output());
  REQUIRE(read.size() == 11);
  CHECK(read["loss/train"].size() == 20);
  CHECK(read["loss/train"][7] == Approx(10.0 - 0.07).epsilon(1e-6));  // stored as float32
  CHECK(read["loss/eval"].size() == 4);
  CHECK(read["loss/eval"][15] == Approx(2.25).epsilon(1e-6));
  CHECK(read["pairs/kept_backward_fraction"][20] == Approx(0.9).epsilon(1e-6));
  CHECK(read["moe/replicas_per_layer"][1] == Approx(2.0));
}
