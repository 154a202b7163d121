// Expert-sharded state's fetch (core/pipeline/expert_fetch_plan.hpp,
// core/model/fetched_experts.hpp): a process receives exactly the experts its ranks host and does
// not hold, from their homes, once each; their gradients come home summed.

#include <catch2/catch.hpp>

#include <memory>

#include "core/model/fetched_experts.hpp"
#include "support/in_processes.hpp"

using namespace lrmoe;
using lrmoe_test::in_processes;

namespace {

// Four experts on two ranks, one rank per process: experts 0 and 1 are homed on rank 0, 2 and 3
// on rank 1. Rank 0 hosts 0 and a replica of 3; rank 1 hosts 1 (its owner, away from its home,
// as SYMI places owners), 2, 3 and a replica of 0.
InstanceTable two_rank_table() {
  PlacementPlan plan;
  plan.instances = {{0, 0, 0, true}, {3, 0, 1, false}, {1, 1, 0, true},
                    {2, 1, 1, true}, {3, 1, 2, true},  {0, 1, 3, false}};
  plan.quota = {8, 8, 8, 8};
  return build_instance_table(plan, 4, 2, 4, "test");
}

ProcessView process(int64_t index, int64_t processes, int64_t ranks) {
  return {index, processes, ranks / processes};
}

}  // namespace

TEST_CASE("each process fetches the experts its ranks host from their homes, once each",
          "[fetch]") {
  const InstanceTable table = two_rank_table();

  const ExpertFetchPlan first = plan_expert_fetch(table, 4, 2, process(0, 2, 2));
  CHECK(first.home.first == 0);
  CHECK(first.home.count == 2);
  // Process 1 hosts 1 (owner away from home) and 0 (replica): both come from here.
  CHECK(first.send == std::vector<std::vector<int64_t>>{{}, {0, 1}});
  CHECK(first.receive == std::vector<std::vector<int64_t>>{{}, {3}});
  CHECK(first.fetched == std::vector<int64_t>{3});
  CHECK(first.bank_index == std::vector<int64_t>{0, 1, -1, 2});
  CHECK(first.sent() == 2);

  const ExpertFetchPlan second = plan_expert_fetch(table, 4, 2, process(1, 2, 2));
  CHECK(second.home.first == 2);
  CHECK(second.home.count == 2);
  CHECK(second.send == std::vector<std::vector<int64_t>>{{3}, {}});
  CHECK(second.receive == std::vector<std::vector<int64_t>>{{0, 1}, {}});
  CHECK(second.fetched == std::vector<int64_t>{0, 1});
  CHECK(second.bank_index == std::vector<int64_t>{2, 3, 0, 1});

  // One process hosting both ranks holds every expert and fetches nothing.
  const ExpertFetchPlan alone = plan_expert_fetch(table, 4, 2, process(0, 1, 2));
  CHECK(alone.home.count == 4);
  CHECK(alone.fetched.empty());
  CHECK(alone.sent() == 0);
  CHECK(alone.bank_index == std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("home shards are contiguous, cover every expert once, and follow the static owners",
          "[fetch]") {
  // 10 experts on 4 ranks: ceil(10/4) = 3 per rank, the last rank one; two processes of two
  // ranks: 0-5 and 6-9. With more ranks than experts, ranks past E hold none.
  CHECK(home_shard(10, 4, process(0, 2, 4), 0).first == 0);
  CHECK(home_shard(10, 4, process(0, 2, 4), 0).count == 6);
  CHECK(home_shard(10, 4, process(0, 2, 4), 1).first == 6);
  CHECK(home_shard(10, 4, process(0, 2, 4), 1).count == 4);
  CHECK(home_process(5, 10, 4, process(0, 2, 4)) == 0);
  CHECK(home_process(6, 10, 4, process(0, 2, 4)) == 1);
  CHECK(home_shard(2, 4, process(0, 4, 4), 1).count == 1);
  CHECK(home_shard(2, 4, process(0, 4, 4), 3).count == 0);
}

TEST_CASE(
    "fetched experts hold their home's weights in the compute dtype, a collective issued while "
    "they travel runs, and their gradients come home summed in the master dtype, at once or "
    "when the returns are finished",
    "[fetch][distributed]") {
  const torch::ScalarType compute = GENERATE(torch::kFloat32, torch::kBFloat16);
  const bool deferred = GENERATE(false, true);
  INFO("compute dtype " << compute << ", return deferred " << deferred);
  const std::vector<int> codes = in_processes(2, [compute, deferred](Collectives& collectives) {
    const int64_t me = collectives.rank();
    auto plan = std::make_shared<const ExpertFetchPlan>(
        plan_expert_fetch(two_rank_table(), 4, 2, process(me, 2, 2)));
    // Expert e's gate-up matrix [4, 3] is filled with e + 1, its down matrix [3, 2] with -(e + 1).
    auto weights = [&](double sign, std::vector<int64_t> shape) {
      std::vector<torch::Tensor> matrices;
      for (int64_t e = plan->home.first; e < plan->home.first + plan->home.count; ++e)
        matrices.push_back(torch::full(shape, sign * static_cast<double>(e + 1)));
      return torch::stack(matrices).requires_grad_();
    };
    const torch::Tensor gate_up = weights(1, {4, 3}), down = weights(-1, {3, 2});
    auto returns = deferred ? std::make_shared<GradientReturns>() : nullptr;
    const FetchedExperts fetched = fetch_experts(
        gate_up, down, plan, std::shared_ptr<Collectives>(&collectives, [](Collectives*) {}),
        compute, nullptr, returns);
    // Issued after the fetch started and before it is waited for, as the pairs' dispatch is.
    torch::Tensor between = torch::full({1}, static_cast<double>(me + 1));
    collectives.sum(between);
    fetched.arrival->wait();

    bool ok = between.item<double>() == 3 && fetched.gate_up.scalar_type() == compute &&
              fetched.gate_up.size(0) == static_cast<int64_t>(plan->fetched.size()) &&
              fetched.down.size(0) == fetched.gate_up.size(0);
    for (std::size_t i = 0; ok && i < plan->fetched.size(); ++i) {
      const auto value = static_cast<double>(plan->fetched[i] + 1);
      ok = fetched.gate_up[static_cast<int64_t>(i)].eq(value).all().item<bool>() &&
           fetched.down[static_cast<int64_t>(i)].eq(-value).all().item<bool>();
    }
    // Each process weighs its fetched matrices by (its index + 1) and its home ones by 3, so
    // home expert e's gradient is 3 plus the index + 1 of every process that fetched e.
    const double weight = static_cast<double>(me + 1);
    ((fetched.gate_up.sum() + fetched.down.sum()) * weight + (gate_up.sum() + down.sum()) * 3)
        .backward();
    if (deferred) {
      // Before the returns finish, only the home's own part; a collective issued meanwhile runs.
      ok = ok && gate_up.grad().eq(3).all().item<bool>() && !returns->empty();
      torch::Tensor meanwhile = torch::ones({1});
      collectives.sum(meanwhile);
      ok = ok && meanwhile.item<double>() == 2;
      returns->finish();
      ok = ok && returns->empty();
    }
    // Process 0 sends 0 and 1 to process 1 (weight 2); process 1 sends 3 to process 0 (weight 1).
    const std::vector<double> expected =
        me == 0 ? std::vector<double>{5, 5} : std::vector<double>{3, 4};
    for (std::size_t i = 0; ok && i < expected.size(); ++i) {
      const auto m = static_cast<int64_t>(i);
      ok = gate_up.grad().scalar_type() == torch::kFloat32 &&
           gate_up.grad()[m].eq(expected[i]).all().item<bool>() &&
           down.grad()[m].eq(expected[i]).all().item<bool>();
    }
    return ok;
  });
  CHECK(codes == std::vector<int>{0, 0});
}
