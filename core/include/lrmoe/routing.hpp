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

// The pairs of one pass counted per (home rank, expert): all a count routing sees.
struct CountRoutingRequest {
  Phase phase = Phase::Forward;
  int64_t step = 0;
  int64_t layer = 0;
  int64_t ranks = 0;
  int64_t num_experts = 0;
  // [ranks * num_experts]: the pairs homed on rank h of expert e at [h * num_experts + e], over
  // every process
  std::vector<int64_t> pairs;
  std::vector<ExpertInstance> instances;
  std::vector<std::vector<int64_t>> expert_instances;  // as in RoutingRequest
  std::vector<int64_t> capacity;                       // as in RoutingRequest
};

// Optional, for scalable planning (Note [Scalable planning] in docs/notes.md): a routing that
// depends on the pairs only through their counts per (home rank, expert). Every process can then
// agree on it from summed counts, without seeing another process's pairs. The runner gives each
// (home rank, expert) group's pairs, in pair order, to the expert's instances in the order of
// `expert_instances`, as many to each as route_counts says. Such a policy also implements
// route(), which the exact plan calls and which must give every group the same counts.
// Found by dynamic_cast: a routing without it runs only in the exact plan.
class CountRoutingPolicy : public RoutingPolicy {
 public:
  // Returns [ranks * instances]: the pairs homed on rank h routed to instance i at
  // [h * instances + i]. For every (h, e) the counts over e's instances sum to the request's
  // pairs[h * num_experts + e]; every other instance gets 0.
  virtual std::vector<int64_t> route_counts(const CountRoutingRequest& request) = 0;
};

}  // namespace lrmoe
