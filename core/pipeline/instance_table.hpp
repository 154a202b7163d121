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

// One expert's instances: indices into InstanceTable::instances, owner first.
class InstanceList {
 public:
  InstanceList(const int64_t* first, const int64_t* last) : first_(first), last_(last) {}
  const int64_t* begin() const { return first_; }
  const int64_t* end() const { return last_; }
  std::size_t size() const { return static_cast<std::size_t>(last_ - first_); }
  int64_t front() const { return *first_; }
  int64_t operator[](std::size_t k) const { return first_[k]; }

 private:
  const int64_t* first_;
  const int64_t* last_;
};

struct InstanceTable {
  std::vector<ExpertInstance> instances;  // sorted by (rank, slot)
  // Each expert's instances end to end, owner first: expert e's at [expert_offsets[e],
  // expert_offsets[e + 1]) of expert_order. Two flat lists, not a list per expert: a layer's
  // plan builds a table, and its 128 small allocations were half the table's time in profiles.
  std::vector<int64_t> expert_offsets;  // [experts + 1]
  std::vector<int64_t> expert_order;    // [instances]
  std::vector<int64_t> instance_rank;   // [instances]
  // The same per instance as tensors for the exact plan's device work: [instances] int64, on
  // the training device, set by place_on (undefined before: the scalable plan, which routes
  // counts, does not read them).
  torch::Tensor instance_expert;
  torch::Tensor instance_rank_tensor;
  // PlacementPlan::co_located_share_copy: one expert's instances on one rank share one copy.
  bool co_located_share_copy = false;

  int64_t size() const { return static_cast<int64_t>(instances.size()); }
  int64_t num_experts() const {
    return expert_offsets.empty() ? 0 : static_cast<int64_t>(expert_offsets.size()) - 1;
  }
  int64_t replicas() const { return size() - num_experts(); }
  InstanceList instances_of(int64_t expert) const {
    const int64_t* order = expert_order.data();
    return {order + expert_offsets[static_cast<std::size_t>(expert)],
            order + expert_offsets[static_cast<std::size_t>(expert) + 1]};
  }
  // Sets `lists` to the lists as routing plugins take them (RoutingRequest::expert_instances),
  // in the storage they have: a request kept from layer to layer allocates nothing.
  void copy_instance_lists(std::vector<std::vector<int64_t>>& lists) const;
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
// the table, without its tensors (place_on). `policy` names the placement in messages.
InstanceTable build_instance_table(const PlacementPlan& plan, int64_t num_experts, int64_t ranks,
                                   int64_t slots_per_rank, const std::string& policy);

}  // namespace lrmoe
