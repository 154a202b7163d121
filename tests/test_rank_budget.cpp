// How a rank's memory divides between the dense state, the experts' optimizer state and the MoE
// layers (core/pipeline/rank_budget.hpp), with the optimizer state on the device or in host
// memory (Note [Optimizer state in host memory]).

#include <catch2/catch.hpp>
#include <cstdlib>

#include "core/config/experiment_loader.hpp"
#include "core/pipeline/rank_budget.hpp"
#include "support/child_process.hpp"

using namespace lrmoe;

namespace {

RankBudget budget_of(const std::string& bundle, const std::string& optimizer_state) {
  const Experiment e =
      load_experiment(lrmoe_test::kTinyExperiment,
                      {"policies.bundle=" + bundle, "policies.optimizer_state=" + optimizer_state,
                       "cluster.memory_per_rank=1.0x fixed"});
  return rank_budget(e.model, e.train, e.cluster, pair_costs(e.model, e),
                     e.policies.optimizer_state);
}

}  // namespace

TEST_CASE(
    "optimizer state in host memory leaves the device budget to the MoE layers, in units of "
    "fixed ownership's need on the device",
    "[memory]") {
  const RankBudget device = budget_of("fixed", "bundle");
  REQUIRE(device.optimizer_bytes > 0);
  CHECK(device.host_optimizer_bytes == 0);
  // SYMI's bundle keeps it in host memory, as its paper does.
  const RankBudget host = budget_of("symi", "bundle");
  CHECK(host.optimizer_bytes == 0);
  CHECK(host.host_optimizer_bytes == device.optimizer_bytes);
  // The same "1.0x fixed" bytes per rank; the MoE layers share what the state left.
  CHECK(host.memory_per_rank == device.memory_per_rank);
  CHECK(host.fixed_need_bytes == device.fixed_need_bytes);
  const int64_t moe_layers =
      moe_layer_count(load_experiment(lrmoe_test::kTinyExperiment, {}).model);
  // (each share rounded down to whole bytes)
  CHECK(std::abs(host.layer_bytes - device.layer_bytes - device.optimizer_bytes / moe_layers) <= 1);
  // The harness's variant of SYMI with its state on the device budgets as fixed ownership does.
  const RankBudget symi_on_device = budget_of("symi", "device");
  CHECK(symi_on_device.optimizer_bytes == device.optimizer_bytes);
  CHECK(symi_on_device.layer_bytes == device.layer_bytes);
}
