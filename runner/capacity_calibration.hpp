#pragma once
// The forward capacity factor at which fixed ownership drops a given fraction of the routed
// pairs, found on recorded per-expert loads (lrmoe gate calibrates its "about half dropped" arm
// on the dropless runs' loads). The capacity is fixed ownership's, C = ceil(mean pairs per
// expert * factor) per pass, and the pairs past C are dropped (policies/placement/
// fixed_ownership.cpp).

#include <cstdint>
#include <vector>

namespace lrmoe {

// One MoE layer's pass: pairs routed to each expert.
using PassLoads = std::vector<int64_t>;

// The fraction of all routed pairs of `passes` that capacity factor `factor` drops.
double dropped_fraction(const std::vector<PassLoads>& passes, double factor);

// The smallest factor (to 1e-4) that drops at most `fraction` of the pairs;
// `passes` must hold at least one routed pair. The dropped fraction falls as the factor grows,
// in steps, so the factor returned drops `fraction` as nearly as these loads allow.
double capacity_factor_dropping(const std::vector<PassLoads>& passes, double fraction);

}  // namespace lrmoe
