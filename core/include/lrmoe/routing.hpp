#pragma once
// Routing policy: assign each pair to one instance of its expert. Called in the forward phase
// for every computed pair, and in the backward phase for the kept pairs only.

#include <cstdint>
#include <vector>

#include "lrmoe/placement.hpp"
#include "lrmoe/policy.hpp"

namespace lrmoe {

enum class Phase { Forward, Backward };

struct RoutingRequest {
  Phase phase = Phase::Forward;
  int64_t step = 0;
  int64_t layer = 0;
  int64_t ranks = 0;
  // Tensors on the run's device, or on the CPU for a policy whose descriptor says its inputs are
  // TensorPlace::Host (lrmoe/plugin.hpp).
  at::Tensor experts;                     // [pairs] int64, sorted by expert
  at::Tensor home_ranks;                  // [pairs] int64: the rank holding the pair's token
  std::vector<ExpertInstance> instances;  // the plan's instances
  // Per expert, the indices into `instances` of its instances, the owner first.
  std::vector<std::vector<int64_t>> expert_instances;
  // Per rank, how many of these pairs it can take within its memory budget. A policy may
  // exceed it; the runner then stops the run with the numbers.
  std::vector<int64_t> capacity;
};

class RoutingPolicy : public Policy {
 public:
  // Returns [pairs] int64 on the device of the request's tensors: the index into `instances` of
  // each pair's instance, which must be an instance of the pair's expert.
  virtual at::Tensor route(const RoutingRequest& request) = 0;
};

}  // namespace lrmoe
