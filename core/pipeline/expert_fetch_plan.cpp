#include "core/pipeline/expert_fetch_plan.hpp"

#include <algorithm>

#include "lrmoe/static_owners.hpp"

namespace lrmoe {

ExpertShard home_shard(int64_t num_experts, int64_t ranks, const ProcessView& view,
                       int64_t process) {
  const int64_t per_rank = owned_experts_per_rank(num_experts, ranks);
  const int64_t first = std::min(num_experts, process * view.ranks_per_process * per_rank);
  const int64_t end = std::min(num_experts, (process + 1) * view.ranks_per_process * per_rank);
  return {first, end - first};
}

int64_t home_process(int64_t expert, int64_t num_experts, int64_t ranks, const ProcessView& view) {
  return view.process_of(static_owner(expert, num_experts, ranks).rank);
}

int64_t ExpertFetchPlan::sent() const {
  int64_t total = 0;
  for (const auto& experts : send) total += static_cast<int64_t>(experts.size());
  return total;
}

ExpertFetchPlan plan_expert_fetch(const InstanceTable& table, int64_t num_experts, int64_t ranks,
                                  const ProcessView& view) {
  const auto processes = static_cast<std::size_t>(view.processes);
  // [processes][experts]: whether a rank of the process hosts an instance of the expert.
  std::vector<std::vector<char>> hosts(processes,
                                       std::vector<char>(static_cast<std::size_t>(num_experts)));
  for (std::size_t i = 0; i < table.instances.size(); ++i) {
    const auto process = static_cast<std::size_t>(view.process_of(table.instance_rank[i]));
    hosts[process][static_cast<std::size_t>(table.instances[i].expert)] = 1;
  }

  ExpertFetchPlan plan;
  plan.home = home_shard(num_experts, ranks, view, view.index);
  plan.send.resize(processes);
  plan.receive.resize(processes);
  plan.bank_index.assign(static_cast<std::size_t>(num_experts), -1);
  const auto me = static_cast<std::size_t>(view.index);
  for (int64_t e = 0; e < num_experts; ++e) {
    const auto expert = static_cast<std::size_t>(e);
    const auto home = static_cast<std::size_t>(home_process(e, num_experts, ranks, view));
    if (home == me) {
      plan.bank_index[expert] = e - plan.home.first;
      for (std::size_t q = 0; q < processes; ++q)
        if (q != me && hosts[q][expert]) plan.send[q].push_back(e);
    } else if (hosts[me][expert]) {
      plan.receive[home].push_back(e);
    }
  }
  for (const auto& experts : plan.receive) {
    for (const int64_t e : experts) {
      plan.bank_index[static_cast<std::size_t>(e)] =
          plan.home.count + static_cast<int64_t>(plan.fetched.size());
      plan.fetched.push_back(e);
    }
  }
  return plan;
}

}  // namespace lrmoe
