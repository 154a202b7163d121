// `lrmoe bench-parallel` runs end to end: one process and each P, the table of step time and
// memory by process count, and each kind of transfer against bare c10d (its figures are
// measurements of a shared machine, so only their presence is checked; benchmarks, not tests,
// judge performance).

#include <catch2/catch.hpp>

#include "support/child_process.hpp"
#include "support/temp_folder.hpp"

using Catch::Matchers::Contains;
using lrmoe_test::kTinyExperiment;
using lrmoe_test::run_lrmoe;
using lrmoe_test::TempFolder;

TEST_CASE(
    "bench-parallel prints step time and memory for one process and each P, and every kind of "
    "transfer against bare c10d",
    "[bench][slow]") {
  TempFolder dir;
  const auto [code, output] =
      run_lrmoe({"bench-parallel", kTinyExperiment, "--set", "cluster.ranks=4", "--set",
                 "cluster.slots_per_rank=3", "--set", "cluster.expert_state=sharded", "--steps",
                 "1", "-n", "2,4", "--rounds", "1"},
                dir.file("bench.log"));
  INFO(output);
  REQUIRE(code == 0);
  CHECK_THAT(output, Contains("expert state sharded"));
  CHECK_THAT(output, Contains("processes   step ms"));
  for (const char* p : {"\n        1  ", "\n        2  ", "\n        4  "})
    CHECK_THAT(output, Contains(p));
  CHECK_THAT(output, Contains("all-to-all-v        process 0 of 2"));
  CHECK_THAT(output, Contains("expert transfers    process 0 of 4"));
  CHECK_THAT(output, Contains("ratio pipeline / back to back"));
}

TEST_CASE("bench-parallel --versus measures a second variant in the same rounds, beside the first",
          "[bench][slow]") {
  TempFolder dir;
  const auto [code, output] =
      run_lrmoe({"bench-parallel", kTinyExperiment, "--set", "cluster.ranks=2", "--set",
                 "cluster.slots_per_rank=5", "--versus", "cluster.overlap_expert_fetch=false",
                 "--steps", "1", "-n", "2", "--rounds", "1"},
                dir.file("bench.log"));
  INFO(output);
  REQUIRE(code == 0);
  CHECK_THAT(output, Contains("[as given] experiment"));
  CHECK_THAT(output, Contains("[cluster.overlap_expert_fetch=false] experiment"));
  CHECK_THAT(output, Contains("vs given"));
  CHECK_THAT(output,
             Contains("[cluster.overlap_expert_fetch=false] expert transfers process 0 of 2"));
}
