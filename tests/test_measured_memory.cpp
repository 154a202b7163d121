// Memory measured beside the model (Note [Memory model]): with sharded expert state and one
// logical rank per process, each process's allocator peak over a step is the memory model's
// peak for its rank within the tolerance the note states (the median over steps 2 to 4 within
// [0.85, 1.2] of the model, every step at most 1.5), with and without replicas.

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/temp_folder.hpp"

using lrmoe_test::kTinyExperiment;
using lrmoe_test::run_lrmoe;
using lrmoe_test::TempFolder;

namespace {

// Large enough that the tensors the model counts are the caching host allocator's (256 KiB and
// more) and the activations weigh beside the weights and optimizer state.
const std::vector<std::string> kSizes{"--set", "model.hidden_size=256",
                                      "--set", "model.expert_ffn_size=512",
                                      "--set", "model.dense_ffn_size=512",
                                      "--set", "train.batch_size=32",
                                      "--set", "train.seq_len=64",
                                      "--set", "train.max_steps=4",
                                      "--set", "train.warmup_steps=1",
                                      "--set", "train.target_loss=0",
                                      "--set", "train.threads=1",
                                      "--set", "cluster.expert_state=sharded",
                                      "--set", "cluster.memory_per_rank=2.0x fixed"};

}  // namespace

TEST_CASE(
    "with one rank per process, each process's measured peak memory is the memory model's "
    "within the stated tolerance",
    "[memory][slow]") {
  // fixed: no replicas; lrmoe and symi at twice fixed ownership's memory: replicas fetched.
  const std::string bundle = GENERATE("fixed", "lrmoe", "symi");
  const int processes = GENERATE(1, 2);
  INFO(bundle << " on " << processes << " processes");
  TempFolder dir;
  const std::string db = dir.file("m.db");
  std::vector<std::string> args{"launch",
                                "-n",
                                std::to_string(processes),
                                kTinyExperiment,
                                "--set",
                                fmt::format("cluster.ranks={}", processes),
                                "--set",
                                fmt::format("cluster.slots_per_rank={}", 12 / processes),
                                "--set",
                                "policies.bundle=" + bundle,
                                "--db",
                                db};
  args.insert(args.end(), kSizes.begin(), kSizes.end());
  const auto [code, output] = run_lrmoe(args, dir.file("run.log"));
  INFO(output);
  REQUIRE(code == 0);

  const lrmoe::QueryResult rows = lrmoe::ResultsStore::open_read_only(db)->query(
      "SELECT rank, step, measured_peak, owned + replicas + gradients + optimizer + "
      "forward_tokens + backward_tokens + dense, replicas FROM rank_memory ORDER BY rank, step");
  REQUIRE(rows.rows.size() == static_cast<std::size_t>(4 * processes));
  std::map<std::string, std::vector<double>> later_steps;  // by rank: steps 2 to 4
  int64_t replicas = 0;
  for (const auto& row : rows.rows) {
    INFO("rank " << *row[0] << ", step " << *row[1]);
    REQUIRE(row[2].has_value());  // measured on the CPU
    const double ratio = std::stod(*row[2]) / std::stod(*row[3]);
    replicas += std::stoll(*row[4]);
    // AdamW's moments are allocated by the first step's update, after its backward: the first
    // step's peak lacks the activations the model adds to them.
    if (*row[1] != "1") later_steps[*row[0]].push_back(ratio);
    CHECK(ratio <= 1.5);  // a single step on several processes: Note [Memory model]
  }
  for (auto& [rank, ratios] : later_steps) {
    INFO("rank " << rank);
    std::sort(ratios.begin(), ratios.end());
    const double median = ratios[ratios.size() / 2];
    CHECK(median >= 0.85);
    CHECK(median <= 1.2);
  }
  if (bundle != "fixed" && processes > 1) CHECK(replicas > 0);
}
