// Placement "fixed_ownership": the expert parallelism of DeepSpeed-MoE and Megatron-Core. Expert
// e lives on rank e / ceil(E/R), slot e % ceil(E/R), forever (lrmoe/static_owners.hpp); no
// replicas, so the hottest rank carries its experts' whole load. Every pair keeps its backward
// work.
//
// capacity_factor > 0 turns on the forward capacity of those systems: every expert computes at
// most C = ceil(k * T / E * capacity_factor) pairs (k top-k, T tokens); the runner drops the
// lowest-gate pairs past C, as Megatron's drop-by-probability does, or with drop = "random" as
// many pairs chosen at random (the gate's control arm for the rule). 0 is dropless.
//
// capacity >= 0 sets C in pairs instead, whatever the factor; capacity = 0 drops every pair in
// forward, which removes the routed experts from the model (the control arm of `lrmoe gate`).

#include <lrmoe/plugin.hpp>

#include <cmath>

namespace {

class FixedOwnership : public lrmoe::PlacementPolicy {
 public:
  explicit FixedOwnership(const lrmoe::Parameters& parameters)
      : capacity_factor_(parameters.real("capacity_factor")),
        capacity_(parameters.integer("capacity")),
        drop_(parameters.text("drop") == "random" ? lrmoe::ForwardDrop::Random
                                                  : lrmoe::ForwardDrop::LowestGate) {}

  lrmoe::PlanInformation plans_from() const override { return lrmoe::PlanInformation::NoCounts; }

  lrmoe::PlacementPlan plan(const lrmoe::PlacementRequest& request) override {
    const int64_t experts = request.num_experts;
    lrmoe::PlacementPlan plan;
    plan.instances = lrmoe::static_owners(experts, request.ranks);
    plan.quota.assign(static_cast<size_t>(experts), lrmoe::kKeepEveryPair);
    plan.information = lrmoe::PlanInformation::NoCounts;  // the same owners every pass
    plan.forward_drop = drop_;
    if (capacity_ >= 0) {
      plan.forward_capacity.assign(static_cast<size_t>(experts), capacity_);
    } else if (capacity_factor_ > 0) {
      // In Megatron's order: pairs per expert, then the factor.
      const double pairs_per_expert =
          static_cast<double>(request.top_k * request.tokens) / static_cast<double>(experts);
      plan.forward_capacity.assign(
          static_cast<size_t>(experts),
          static_cast<int64_t>(std::ceil(pairs_per_expert * capacity_factor_)));
    }
    return plan;
  }

 private:
  double capacity_factor_;
  int64_t capacity_;
  lrmoe::ForwardDrop drop_;
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<FixedOwnership>(
      "fixed_ownership", "1.3.0",
      "each expert on one fixed rank, no replicas (DeepSpeed-MoE, Megatron)",
      {lrmoe::real_parameter(
           "capacity_factor", 0.0,
           "forward capacity per expert, as a multiple of the mean pairs per expert; 0 is dropless",
           0, lrmoe::kMostCapacityFactor),
       lrmoe::integer_parameter("capacity", -1,
                                "forward capacity per expert in pairs, overriding capacity_factor; "
                                "-1: none; 0 drops every pair (the routed experts removed)",
                                -1),
       lrmoe::text_parameter("drop", "lowest_gate",
                             "which pairs past the capacity drop: each expert's lowest gates, or "
                             "as many at random",
                             {"lowest_gate", "random"})});
}

}  // namespace

LRMOE_PLUGIN(describe)
