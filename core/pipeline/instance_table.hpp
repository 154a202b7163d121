#pragma once
// A placement plan's expert instances, checked and laid out in destination order: instance i is
// the i-th by (rank, slot), so the pairs bound for one rank, and within it for one instance, are
// contiguous once pairs are sorted by instance (Note [Pair order] in docs/notes.md).

#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "lrmoe/placement.hpp"

namespace lrmoe {

// A plan that breaks the placement contract or the memory budget; the message has the numbers.
class PlanError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct InstanceTable {
  std::vector<ExpertInstance> instances;  // sorted by (rank, slot)
  // per expert, indices into instances, owner first
  std::vector<std::vector<int64_t>> expert_instances;
  std::vector<int64_t> instance_rank;  // [instances]
  // The same per instance as tensors for the plan's device work: [instances] int64, on the CPU
  // as built, on the training device after place_on.
  torch::Tensor instance_expert;
  torch::Tensor instance_rank_tensor;
  // PlacementPlan::co_located_share_copy: one expert's instances on one rank share one copy.
  bool co_located_share_copy = false;

  int64_t size() const { return static_cast<int64_t>(instances.size()); }
  int64_t replicas() const { return size() - static_cast<int64_t>(expert_instances.size()); }
  std::vector<int64_t> instances_per_rank(int64_t ranks) const;
  std::vector<int64_t> owners_per_rank(int64_t ranks) const;
  // The expert copies each rank holds: one per instance, or one per expert it hosts when
  // co-located instances share a copy.
  std::vector<int64_t> copies_per_rank(int64_t ranks) const;
  // Fills the tensors from the lists, on `device` (a host-to-device copy: no wait).
  void place_on(const torch::Device& device);
};

// Checks `plan` against the placement contract (every expert has instances and one owner, ranks
// and slots in range, no slot used twice, quotas and capacities per expert and >= 0) and builds
// the table. `policy` names the placement in messages.
InstanceTable build_instance_table(const PlacementPlan& plan, int64_t num_experts, int64_t ranks,
                                   int64_t slots_per_rank, const std::string& policy);

}  // namespace lrmoe
