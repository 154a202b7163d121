#pragma once
// A placement plan as the memory model sees it (Note [Memory model] in docs/notes.md): what
// every rank holds for one MoE layer, whether that fits the layer's budget, and how many more
// pairs of one phase each rank has room for (the capacity a routing policy is given).

#include <cstdint>
#include <string>
#include <vector>

#include "core/pipeline/instance_table.hpp"
#include "lrmoe/memory_model.hpp"

namespace lrmoe {

// Per rank: the instances it owns and the replica copies it holds, with the given pair loads
// ([ranks] each).
std::vector<LayerHolding> rank_holdings(const InstanceTable& table,
                                        const std::vector<double>& forward_pairs,
                                        const std::vector<double>& backward_pairs);

// Pairs each rank would hold if every expert's `pairs` ([experts]) were split evenly over its
// instances: the load a plan assumes before routing decides.
std::vector<double> even_split(const InstanceTable& table, const std::vector<int64_t>& pairs,
                               int64_t ranks);

// A layout's routed pairs per rank as the loads rank_holdings takes.
std::vector<double> as_loads(const std::vector<int64_t>& load);

// Throws PlanError with the numbers if any rank's holding exceeds `budget_bytes`. `plan` says
// whose plan it is ("step 3, MoE layer 1: the plan of placement 'lrmoe'"), `stage` when it was
// checked ("after forward routing").
void check_plan_fits(const std::vector<LayerHolding>& holdings, const MemoryCosts& costs,
                     int64_t budget_bytes, const std::string& plan, const std::string& stage);

// Per rank, the pairs of one phase that still fit beside `holdings`: `pairs_that_fit` is
// forward_pairs_that_fit or backward_pairs_that_fit (lrmoe/memory_model.hpp).
std::vector<int64_t> rank_room(const std::vector<LayerHolding>& holdings, const MemoryCosts& costs,
                               int64_t budget_bytes,
                               int64_t (*pairs_that_fit)(const MemoryCosts&, LayerHolding,
                                                         int64_t));

}  // namespace lrmoe
