#include "core/pipeline/plan_budget.hpp"

#include <fmt/format.h>

#include "core/config/byte_size.hpp"

namespace lrmoe {

std::vector<LayerHolding> rank_holdings(const InstanceTable& table,
                                        const std::vector<double>& forward_pairs,
                                        const std::vector<double>& backward_pairs) {
  const auto ranks = static_cast<int64_t>(forward_pairs.size());
  const std::vector<int64_t> owned = table.owners_per_rank(ranks);
  const std::vector<int64_t> copies = table.copies_per_rank(ranks);
  std::vector<LayerHolding> holdings(forward_pairs.size());
  for (std::size_t r = 0; r < holdings.size(); ++r) {
    holdings[r].owned = owned[r];
    holdings[r].replicas = copies[r] - owned[r];
    holdings[r].forward_pairs = forward_pairs[r];
    holdings[r].backward_pairs = backward_pairs[r];
  }
  return holdings;
}

std::vector<double> as_loads(const std::vector<int64_t>& load) {
  return {load.begin(), load.end()};
}

std::vector<double> even_split(const InstanceTable& table, const std::vector<int64_t>& pairs,
                               int64_t ranks) {
  std::vector<double> load(static_cast<std::size_t>(ranks), 0.0);
  for (std::size_t e = 0; e < pairs.size(); ++e) {
    const InstanceList instances = table.instances_of(static_cast<int64_t>(e));
    for (int64_t i : instances)
      load[table.instance_rank[i]] += static_cast<double>(pairs[e]) / instances.size();
  }
  return load;
}

// The budget covers what the placement decides: instances and token buffers (optimizer state
// and dense state were taken out of it up front, core/pipeline/rank_budget.cpp).
void check_plan_fits(const std::vector<LayerHolding>& holdings, const MemoryCosts& c,
                     int64_t budget_bytes, const std::string& plan, const std::string& stage) {
  for (std::size_t r = 0; r < holdings.size(); ++r) {
    const LayerHolding& h = holdings[r];
    if (layer_fits(c, h, budget_bytes)) continue;
    throw PlanError(fmt::format(
        "{} does not fit rank {} {}: {} expert copies ({} replicas) x {} + {:.0f} forward pairs x "
        "({} "
        "B saved + {} B in "
        "forward) + {:.0f} kept pairs x {} B in backward peak at {} > {} per rank for this layer; "
        "raise "
        "cluster.memory_per_rank, lower the quotas, or use a placement that fits",
        plan, r, stage, h.owned + h.replicas, h.replicas,
        readable_byte_size(static_cast<double>(c.expert_bytes)), h.forward_pairs,
        c.saved_pair_bytes, c.forward_pair_bytes, h.backward_pairs, c.backward_pair_bytes,
        readable_byte_size(layer_peak_bytes(c, h)),
        readable_byte_size(static_cast<double>(budget_bytes))));
  }
}

std::vector<int64_t> rank_room(const std::vector<LayerHolding>& holdings, const MemoryCosts& costs,
                               int64_t budget_bytes,
                               int64_t (*pairs_that_fit)(const MemoryCosts&, LayerHolding,
                                                         int64_t)) {
  std::vector<int64_t> pairs;
  pairs.reserve(holdings.size());
  for (const LayerHolding& h : holdings) pairs.push_back(pairs_that_fit(costs, h, budget_bytes));
  return pairs;
}

}  // namespace lrmoe
