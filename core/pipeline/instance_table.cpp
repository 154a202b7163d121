#include "core/pipeline/instance_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

#include "core/pipeline/quota_pools.hpp"

namespace lrmoe {
namespace {

void check_per_expert(const std::vector<int64_t>& values, int64_t num_experts, bool may_be_empty,
                      const std::string& what, const std::string& policy) {
  if (may_be_empty && values.empty()) return;
  if (static_cast<int64_t>(values.size()) != num_experts) {
    throw PlanError(fmt::format("placement '{}' returned {} {} values for {} experts", policy,
                                values.size(), what, num_experts));
  }
  for (std::size_t e = 0; e < values.size(); ++e) {
    if (values[e] < 0) {
      throw PlanError(fmt::format("placement '{}' returned a negative {} ({}) for expert {}",
                                  policy, what, values[e], e));
    }
  }
}

}  // namespace

std::vector<int64_t> InstanceTable::instances_per_rank(int64_t ranks) const {
  std::vector<int64_t> count(static_cast<std::size_t>(ranks), 0);
  for (const ExpertInstance& instance : instances) ++count[instance.rank];
  return count;
}

std::vector<int64_t> InstanceTable::copies_per_rank(int64_t ranks) const {
  if (!co_located_share_copy) return instances_per_rank(ranks);
  std::set<std::pair<int64_t, int64_t>> hosted;  // (rank, expert)
  for (const ExpertInstance& instance : instances) hosted.emplace(instance.rank, instance.expert);
  std::vector<int64_t> count(static_cast<std::size_t>(ranks), 0);
  for (const auto& [rank, expert] : hosted) ++count[rank];
  return count;
}

void InstanceTable::place_on(const torch::Device& device) {
  std::vector<int64_t> experts;
  experts.reserve(instances.size());
  for (const ExpertInstance& instance : instances) experts.push_back(instance.expert);
  instance_expert = torch::tensor(experts, torch::kInt64).to(device);
  instance_rank_tensor = torch::tensor(instance_rank, torch::kInt64).to(device);
}

void InstanceTable::copy_instance_lists(std::vector<std::vector<int64_t>>& lists) const {
  lists.resize(static_cast<std::size_t>(num_experts()));
  for (int64_t e = 0; e < num_experts(); ++e) {
    const InstanceList list = instances_of(e);
    lists[static_cast<std::size_t>(e)].assign(list.begin(), list.end());
  }
}

std::vector<int64_t> InstanceTable::owners_per_rank(int64_t ranks) const {
  std::vector<int64_t> count(static_cast<std::size_t>(ranks), 0);
  for (const ExpertInstance& instance : instances) count[instance.rank] += instance.owner ? 1 : 0;
  return count;
}

InstanceTable build_instance_table(const PlacementPlan& plan, int64_t num_experts, int64_t ranks,
                                   int64_t slots_per_rank, const std::string& policy) {
  // Declared before the first check. Declared after the quota checks, the fuzz target's build
  // (clang 14, optimised, with sanitizers) crashed destroying it while unwinding from the range
  // check below; declared first, or this function built unoptimised, it runs clean. Not
  // understood; the input is a seed of scripts/fuzz.sh.
  InstanceTable table;
  check_per_expert(plan.quota, num_experts, false, "quota", policy);
  check_per_expert(plan.forward_capacity, num_experts, true, "forward capacity", policy);
  check_quota_pools(plan.quota_pool, num_experts, policy);
  table.instances = plan.instances;
  table.co_located_share_copy = plan.co_located_share_copy;
  std::vector<char> used(static_cast<std::size_t>(ranks * slots_per_rank), 0);  // [rank, slot]
  for (const ExpertInstance& instance : table.instances) {
    if (instance.expert < 0 || instance.expert >= num_experts || instance.rank < 0 ||
        instance.rank >= ranks || instance.slot < 0 || instance.slot >= slots_per_rank) {
      throw PlanError(fmt::format(
          "placement '{}' put expert {} on rank {} slot {}, outside {} experts, {} ranks and {} "
          "slots per rank",
          policy, instance.expert, instance.rank, instance.slot, num_experts, ranks,
          slots_per_rank));
    }
    if (std::exchange(
            used[static_cast<std::size_t>(instance.rank * slots_per_rank + instance.slot)],
            char{1})) {
      throw PlanError(fmt::format("placement '{}' put two instances on rank {} slot {}", policy,
                                  instance.rank, instance.slot));
    }
  }
  std::sort(table.instances.begin(), table.instances.end(),
            [](const ExpertInstance& a, const ExpertInstance& b) {
              return std::make_pair(a.rank, a.slot) < std::make_pair(b.rank, b.slot);
            });

  // Each expert's instances counted, its owner checked, then laid out: the owner at the start
  // of its range, replicas after it in (rank, slot) order.
  const auto E = static_cast<std::size_t>(num_experts);
  std::vector<char> owned(E, 0);
  table.expert_offsets.assign(E + 1, 0);
  for (const ExpertInstance& instance : table.instances) {
    const auto e = static_cast<std::size_t>(instance.expert);
    ++table.expert_offsets[e + 1];
    if (instance.owner && std::exchange(owned[e], char{1}))
      throw PlanError(
          fmt::format("placement '{}' gave expert {} two owners", policy, instance.expert));
  }
  for (std::size_t e = 0; e < E; ++e) {
    if (table.expert_offsets[e + 1] == 0 || !owned[e])
      throw PlanError(fmt::format("placement '{}' gave expert {} {}", policy, e,
                                  table.expert_offsets[e + 1] == 0 ? "no instance" : "no owner"));
    table.expert_offsets[e + 1] += table.expert_offsets[e];
  }
  table.expert_order.resize(table.instances.size());
  std::vector<int64_t> next_replica(table.expert_offsets.begin(), table.expert_offsets.end() - 1);
  for (int64_t& next : next_replica) ++next;
  table.instance_rank.reserve(table.instances.size());
  for (int64_t i = 0; i < table.size(); ++i) {
    const ExpertInstance& instance = table.instances[static_cast<std::size_t>(i)];
    const auto e = static_cast<std::size_t>(instance.expert);
    table.expert_order[static_cast<std::size_t>(instance.owner ? table.expert_offsets[e]
                                                               : next_replica[e]++)] = i;
    table.instance_rank.push_back(instance.rank);
  }
  return table;
}

}  // namespace lrmoe
