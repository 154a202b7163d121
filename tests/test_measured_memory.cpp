// Memory measured beside the model (Note [Memory model]): with sharded expert state and one
// logical rank per process, each process's allocator peak over a step is the memory model's
// peak for its rank within the tolerance the note states (every step at most 1.2 of the model,
// and from the second step on at least 0.85), with and without replicas, and the same in every
// run.

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "runner/query_result_text.hpp"
#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/temp_folder.hpp"

using lrmoe_test::kTinyExperiment;
using lrmoe_test::run_lrmoe;
using lrmoe_test::TempFolder;

namespace {

// Large enough that the tensors the model counts are the caching host allocator's (256 KiB and
// more) and the activations weigh beside the weights and optimizer state.
const std::vector<std::string> kSizes{
    "--set", "model.hidden_size=256", "--set", "model.expert_ffn_size=512", "--set",
    "model.dense_ffn_size=512", "--set", "train.batch_size=32", "--set", "train.seq_len=64",
    "--set", "train.max_steps=4", "--set", "train.warmup_steps=1", "--set", "train.target_loss=0",
    "--set", "train.threads=1", "--set", "cluster.expert_state=sharded", "--set",
    "cluster.memory_per_rank=2.0x fixed",
    // Every bundle's optimizer state in the budget: on a CPU
    // the host's memory is the process's, which is measured.
    "--set", "policies.optimizer_state=device"};

// Runs tiny-moe at kSizes on `processes` processes, one rank each, under `bundle`, and returns
// its recorded `rank_memory` columns `columns`, ordered by rank and step.
lrmoe::QueryResult measured_run(const std::string& bundle, int processes,
                                const std::string& columns) {
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
  return lrmoe::ResultsStore::open_read_only(db)->query(
      fmt::format("SELECT {} FROM rank_memory ORDER BY rank, step", columns));
}

}  // namespace

TEST_CASE(
    "with one rank per process, each process's measured peak memory is the memory model's "
    "within the stated tolerance",
    "[memory][slow]") {
  // fixed: no replicas; lrmoe and symi at twice fixed ownership's memory: replicas fetched.
  const std::string bundle = GENERATE("fixed", "lrmoe", "symi");
  const int processes = GENERATE(1, 2);
  INFO(bundle << " on " << processes << " processes");
  const lrmoe::QueryResult rows =
      measured_run(bundle, processes,
                   "rank, step, measured_peak, owned + replicas + gradients + optimizer + "
                   "forward_tokens + backward_tokens + dense, replicas");
  REQUIRE(rows.rows.size() == static_cast<std::size_t>(4 * processes));
  int64_t replicas = 0;
  for (const auto& row : rows.rows) {
    INFO("rank " << *row[0] << ", step " << *row[1]);
    REQUIRE(row[2].has_value());  // measured on the CPU
    const double ratio = std::stod(*row[2]) / std::stod(*row[3]);
    replicas += std::stoll(*row[4]);
    CHECK(ratio <= 1.2);
    // AdamW's moments are allocated by the first step's update, after its backward: the first
    // step's peak lacks the activations the model adds to them.
    if (*row[1] != "1") CHECK(ratio >= 0.85);
  }
  if (bundle != "fixed" && processes > 1) CHECK(replicas > 0);
}

TEST_CASE(
    "on two processes, the same run measures the same peak memory every time, whenever the "
    "collective backend's threads run",
    "[memory][slow]") {
  // LRMoE with replicas: dispatch, combine, replica fetches and gradient returns all exchange.
  // Gloo's worker threads let go of a finished exchange's buffers when the scheduler runs them;
  // before the exchange waited for that, one run in two measured a step up to 15% higher.
  const std::string columns =
      "rank, step, measured_peak, measured_forward_peak, "
      "measured_backward_peak";
  const lrmoe::QueryResult first = measured_run("lrmoe", 2, columns);
  REQUIRE(first.rows.size() == 8);
  for (int run = 2; run <= 3; ++run) {
    INFO("run " << run);
    CHECK(lrmoe::render_csv(measured_run("lrmoe", 2, columns)) == lrmoe::render_csv(first));
  }
}
