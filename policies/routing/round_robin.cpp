// Routing "round_robin": the i-th pair of an expert (in pair order) goes to its (i mod count)-th
// instance, so an expert's pairs split evenly (within one) over its instances whatever their
// ranks. SYMI's routing: replica counts follow popularity, and each replica takes an equal share.
// A count routing: an expert's pairs are in home-rank order (Note [Pair order]), so the pairs of
// one home rank are a run of i, and each instance's share of the run follows from its ends.

#include <lrmoe/plugin.hpp>

namespace {

// How many i in [0, end) have i mod count == j.
int64_t turns_before(int64_t end, int64_t j, int64_t count) {
  return (end + count - 1 - j) / count;
}

class RoundRobin : public lrmoe::CountRoutingPolicy {
 public:
  explicit RoundRobin(const lrmoe::Parameters&) {}
  at::Tensor route(const lrmoe::RoutingRequest& request) override {
    const at::Tensor experts = request.experts.contiguous();
    const int64_t* expert = experts.data_ptr<int64_t>();
    at::Tensor routed = at::empty({experts.numel()}, at::kLong);
    int64_t* instance = routed.data_ptr<int64_t>();
    std::vector<size_t> seen(request.expert_instances.size(), 0);  // pairs so far, per expert
    for (int64_t i = 0; i < experts.numel(); ++i) {
      const std::vector<int64_t>& candidates =
          request.expert_instances[static_cast<size_t>(expert[i])];
      instance[i] = candidates[seen[static_cast<size_t>(expert[i])]++ % candidates.size()];
    }
    return routed;
  }

  std::vector<int64_t> route_counts(const lrmoe::CountRoutingRequest& request) override {
    const auto E = static_cast<size_t>(request.num_experts);
    const size_t I = request.instances.size();
    std::vector<int64_t> routed(static_cast<size_t>(request.ranks) * I, 0);
    for (size_t e = 0; e < E; ++e) {
      const std::vector<int64_t>& candidates = request.expert_instances[e];
      const auto count = static_cast<int64_t>(candidates.size());
      int64_t begin = 0;  // the expert's pairs homed before rank h
      for (size_t h = 0; h < static_cast<size_t>(request.ranks); ++h) {
        const int64_t end = begin + request.pairs[h * E + e];
        for (int64_t j = 0; j < count; ++j) {
          routed[h * I + static_cast<size_t>(candidates[static_cast<size_t>(j)])] =
              turns_before(end, j, count) - turns_before(begin, j, count);
        }
        begin = end;
      }
    }
    return routed;
  }
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<RoundRobin>(
      "round_robin", "1.1.0", "an expert's pairs in turn over its instances (even split)", {},
      lrmoe::TensorPlace::Host);
}

}  // namespace

LRMOE_PLUGIN(describe)
