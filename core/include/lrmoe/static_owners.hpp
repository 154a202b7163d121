#pragma once
// Plugin kit: static expert ownership, the rule of fixed expert parallelism (DeepSpeed-MoE,
// Megatron-Core) that the fixed_ownership and lrmoe placements share.
//
// Expert e is owned by rank e / ceil(E/R), in slot e % ceil(E/R), forever: contiguous blocks of
// ceil(E/R) experts per rank, the last rank taking the remainder. An owner never moves, so the
// expert's optimizer state never moves either; a placement that keeps these owners is free to
// add replicas in the slots left over (slots_per_rank > ceil(E/R)). Header-only: using it adds
// nothing to the plugin ABI.

#include <cstdint>
#include <vector>

#include "lrmoe/placement.hpp"

namespace lrmoe {

// ceil(E/R): the slots each rank's owned experts take.
inline int64_t owned_experts_per_rank(int64_t num_experts, int64_t ranks) {
  return (num_experts + ranks - 1) / ranks;
}

// The owning instance of `expert`.
inline ExpertInstance static_owner(int64_t expert, int64_t num_experts, int64_t ranks) {
  const int64_t per_rank = owned_experts_per_rank(num_experts, ranks);
  return {expert, expert / per_rank, expert % per_rank, true};
}

// Every expert's owning instance, in expert order.
inline std::vector<ExpertInstance> static_owners(int64_t num_experts, int64_t ranks) {
  std::vector<ExpertInstance> owners;
  owners.reserve(static_cast<std::size_t>(num_experts));
  for (int64_t e = 0; e < num_experts; ++e) owners.push_back(static_owner(e, num_experts, ranks));
  return owners;
}

}  // namespace lrmoe
