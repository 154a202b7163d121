// Routing "round_robin": the i-th pair of an expert (in pair order) goes to its (i mod count)-th
// instance, so an expert's pairs split evenly (within one) over its instances whatever their
// ranks. SYMI's routing: replica counts follow popularity, and each replica takes an equal share.
// A count routing: an expert's pairs are in home-rank order (Note [Pair order]), so the pairs of
// one home rank are a run of i, and each instance's share of the run follows from its ends.

#include <lrmoe/plugin.hpp>

namespace {

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
    const auto R = static_cast<size_t>(request.ranks);
    const size_t I = request.instances.size();
    std::vector<int64_t> routed(R * I, 0);
    // Of the turns [0, end), instance j takes end / count, and one more when j < end % count:
    // one division per home rank's end, not one per instance and end. Home ranks outermost, so
    // that both tables are read and written in order.
    std::vector<int64_t> end(E, 0), turns(E, 0), extra(E, 0);  // [0, end): pairs homed so far
    for (size_t h = 0; h < R; ++h) {
      for (size_t e = 0; e < E; ++e) {
        const std::vector<int64_t>& candidates = request.expert_instances[e];
        const int64_t pairs = request.pairs[h * E + e];
        if (candidates.empty()) continue;  // no instance: nothing to route (the runner refuses it)
        if (candidates.size() == 1) {      // one instance takes every pair: no turns to count
          routed[h * I + static_cast<size_t>(candidates.front())] = pairs;
          continue;
        }
        const auto count = static_cast<int64_t>(candidates.size());
        end[e] += pairs;
        const int64_t end_turns = end[e] / count, end_extra = end[e] % count;
        for (int64_t j = 0; j < count; ++j) {
          routed[h * I + static_cast<size_t>(candidates[static_cast<size_t>(j)])] =
              end_turns + (j < end_extra) - turns[e] - (j < extra[e]);
        }
        turns[e] = end_turns;
        extra[e] = end_extra;
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
