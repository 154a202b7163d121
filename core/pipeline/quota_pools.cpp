#include "core/pipeline/quota_pools.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/pipeline/instance_table.hpp"
#include "lrmoe/placement.hpp"

namespace lrmoe {
namespace {

// Products of a count (below 2^40) and a mass (below 2^63) need 103 bits. __extension__: GCC and
// Clang have the type, ISO C++ does not.
__extension__ typedef __int128 Wide;

// Spreads `total` pairs over the experts of one pool, in place in `quota`.
void spread_one_pool(const std::vector<std::size_t>& experts, int64_t total,
                     const std::vector<int64_t>& computed, const std::vector<int64_t>& mass,
                     std::vector<int64_t>& quota) {
  Wide left_mass = 0;
  std::vector<std::size_t> open;  // the experts with mass, most constrained first
  for (const std::size_t e : experts) {
    quota[e] = 0;  // an expert without mass keeps nothing: its pairs add nothing to the gradient
    if (mass[e] > 0) {
      open.push_back(e);
      left_mass += mass[e];
    }
  }
  // Water-filling: an expert whose pairs are all within its share computed[e] <= total * m_e / M
  // keeps them all, and the others share what is left. Taking them in increasing computed / mass
  // finds every such expert, since each one taken raises the others' shares.
  std::stable_sort(open.begin(), open.end(), [&](std::size_t a, std::size_t b) {
    return Wide{computed[a]} * mass[b] < Wide{computed[b]} * mass[a];
  });
  std::size_t first_open = 0;
  while (first_open < open.size()) {
    const std::size_t e = open[first_open];
    if (Wide{computed[e]} * left_mass > Wide{total} * mass[e]) break;
    quota[e] = computed[e];
    total -= computed[e];
    left_mass -= mass[e];
    ++first_open;
  }
  if (first_open == open.size()) return;
  // The others: floor(total * m_e / M), and the rounding's pairs to the largest remainders. Each
  // share is below its expert's pairs, so one more pair still fits.
  struct Share {
    std::size_t expert;
    Wide remainder;
  };
  std::vector<Share> shares;
  int64_t given = 0;
  for (std::size_t i = first_open; i < open.size(); ++i) {
    const std::size_t e = open[i];
    const Wide product = Wide{total} * mass[e];
    quota[e] = static_cast<int64_t>(product / left_mass);
    given += quota[e];
    shares.push_back({e, product % left_mass});
  }
  std::stable_sort(shares.begin(), shares.end(), [](const Share& a, const Share& b) {
    return a.remainder != b.remainder ? a.remainder > b.remainder : a.expert < b.expert;
  });
  for (int64_t i = 0; i < total - given; ++i) ++quota[shares[static_cast<std::size_t>(i)].expert];
}

}  // namespace

void check_quota_pools(const std::vector<int64_t>& pools, int64_t num_experts,
                       const std::string& policy) {
  if (pools.empty()) return;
  if (static_cast<int64_t>(pools.size()) != num_experts) {
    throw PlanError(fmt::format("placement '{}' returned {} quota pools for {} experts", policy,
                                pools.size(), num_experts));
  }
  for (std::size_t e = 0; e < pools.size(); ++e) {
    if (pools[e] < kNoQuotaPool) {
      throw PlanError(fmt::format(
          "placement '{}' returned quota pool {} for expert {}: a pool is >= 0, or {} for none",
          policy, pools[e], e, kNoQuotaPool));
    }
  }
}

std::vector<int64_t> score_mass_units(const torch::Tensor& scores, const torch::Tensor& experts,
                                      int64_t num_experts, double largest) {
  // Not finite: scores the output checks (off) let through; the quotas are then kept as planned.
  if (!(largest > 0) || !std::isfinite(largest) || scores.numel() == 0)
    return std::vector<int64_t>(static_cast<std::size_t>(num_experts), 0);
  const double scale = std::ldexp(1.0, 32) / largest;
  const torch::Tensor units =
      (scores.to(torch::kFloat64) * scale).round().clamp_min(0).to(torch::kInt64);
  const torch::Tensor mass = torch::zeros({num_experts}, experts.options().dtype(torch::kInt64))
                                 .index_add_(0, experts, units)
                                 .cpu();
  return {mass.data_ptr<int64_t>(), mass.data_ptr<int64_t>() + num_experts};
}

std::vector<int64_t> spread_pool_quotas(const std::vector<int64_t>& quota,
                                        const std::vector<int64_t>& pools,
                                        const std::vector<int64_t>& computed,
                                        const std::vector<int64_t>& mass) {
  std::vector<int64_t> spread = quota;
  std::map<int64_t, std::vector<std::size_t>> members;  // pool -> its experts, in expert order
  for (std::size_t e = 0; e < pools.size(); ++e)
    if (pools[e] != kNoQuotaPool) members[pools[e]].push_back(e);
  for (const auto& [pool, experts] : members) {
    int64_t total = 0;
    bool any_mass = false;
    // A quota above the computed pairs keeps no more than those: the plan's budget counted
    // min(computed, quota), and that is what the pool may spread.
    for (const std::size_t e : experts) {
      total += std::min(quota[e], computed[e]);
      any_mass = any_mass || mass[e] > 0;
    }
    if (any_mass) spread_one_pool(experts, total, computed, mass, spread);
  }
  return spread;
}

}  // namespace lrmoe
