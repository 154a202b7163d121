#pragma once
// Quotas spread over a placement's quota pools by score mass (Note [Quotas by score mass] in
// docs/notes.md): the placement plans each expert's quota from counts in forward; once the metric
// has scored the pass, each pool's summed quota goes to the pool's experts in proportion to the
// scores they carry.

#include <torch/torch.h>

#include <string>
#include <vector>

namespace lrmoe {

// The plan's `pools` (PlacementPlan::quota_pool) checked against `num_experts`: empty, or one
// pool per expert, each kNoQuotaPool or >= 0. Throws PlanError naming `policy`.
void check_quota_pools(const std::vector<int64_t>& pools, int64_t num_experts,
                       const std::string& policy);

// Score mass in units that sum exactly: each score s of `scores` ([n] float32) becomes
// round(s * (2^32 / largest)) as int64, summed per expert of `experts` ([n] int64, below
// num_experts); `largest` is the largest score over every process (0 or not finite: every mass is
// 0). A score below largest / 2^33 counts as no mass. Integer
// sums are the same in any order, so the exact plan (every pair on every process) and the
// scalable one (each process its own pairs, the sums summed) spread quotas alike. Returns
// [num_experts] on the host.
std::vector<int64_t> score_mass_units(const torch::Tensor& scores, const torch::Tensor& experts,
                                      int64_t num_experts, double largest);

// The quotas after spreading: an expert outside every pool keeps quota[e]; the experts of one
// pool share the sum Q of their quotas (each at most its computed pairs), expert e taking
// min(computed[e], lambda * mass[e]) with lambda the largest that keeps the pool's sum within Q,
// rounded down, the pairs left over by the rounding to the largest remainders (equal: the lower
// expert). A pool whose mass is all zero keeps its quotas as planned. Exact integer arithmetic:
// every process gets the same quotas.
std::vector<int64_t> spread_pool_quotas(const std::vector<int64_t>& quota,
                                        const std::vector<int64_t>& pools,
                                        const std::vector<int64_t>& computed,
                                        const std::vector<int64_t>& mass);

}  // namespace lrmoe
