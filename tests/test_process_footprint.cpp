// A training process's memory floor, checked against the machine before a run is recorded.

#include <catch2/catch.hpp>

#include "core/config/model_presets.hpp"
#include "core/config/parameter_count.hpp"
#include "core/pipeline/instance_table.hpp"
#include "core/pipeline/rank_budget.hpp"
#include "core/system/machine_memory.hpp"
#include "core/train/process_footprint.hpp"

using namespace lrmoe;
using Catch::Matchers::Contains;

TEST_CASE("a process holds 16 bytes per parameter and the activations of its rows", "[memory]") {
  const ModelConfig model = *find_preset("tiny-moe");
  TrainConfig train;
  train.batch_size = 8;
  train.seq_len = 32;
  ClusterConfig cluster;
  cluster.ranks = 4;
  cluster.expert_state = ExpertState::Replicated;
  const ProcessFootprint one = process_footprint(model, train, cluster, 1);
  CHECK(one.model_state_bytes == 16.0 * static_cast<double>(count_parameters(model).total));
  CHECK(one.activation_bytes == static_cast<double>(dense_activation_bytes(model, 8 * 32, 32, 4)));
  // Two processes read half the rows each and hold the whole model each.
  const ProcessFootprint two = process_footprint(model, train, cluster, 2);
  CHECK(two.model_state_bytes == one.model_state_bytes);
  CHECK(two.activation_bytes == static_cast<double>(dense_activation_bytes(model, 4 * 32, 32, 4)));
  // Sharded, each of two processes holds half of the 8 routed experts.
  cluster.expert_state = ExpertState::Sharded;
  const ProcessFootprint sharded = process_footprint(model, train, cluster, 2);
  CHECK(sharded.model_state_bytes ==
        one.model_state_bytes - 16.0 * 4 * static_cast<double>(routed_expert_parameters(model)));
  CHECK(process_footprint(model, train, cluster, 1).model_state_bytes == one.model_state_bytes);
}

TEST_CASE("a footprint larger than the host's memory limit is refused with the numbers",
          "[memory]") {
  const MemoryLimit host = host_memory_limit();
  REQUIRE(host.bytes > 0);
  const double half = static_cast<double>(host.bytes) / 2;
  const torch::Device cpu(torch::kCPU);
  CHECK_NOTHROW(check_footprint_fits({half * 0.9, 0}, cpu, 1));
  // Two processes on the host each need that much.
  CHECK_THROWS_WITH(
      check_footprint_fits({half * 0.9, half * 0.2}, cpu, 2),
      Contains("for the 2 processes on this host, more than this host's " + host.what) &&
          Contains("lower train.batch_size, train.seq_len"));
}
