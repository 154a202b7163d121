// Routing "round_robin": the i-th pair of an expert (in pair order) goes to its (i mod count)-th
// instance, so an expert's pairs split evenly (within one) over its instances whatever their
// ranks. SYMI's routing: replica counts follow popularity, and each replica takes an equal share.

#include <lrmoe/plugin.hpp>

namespace {

class RoundRobin : public lrmoe::RoutingPolicy {
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
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<RoundRobin>(
      "round_robin", "1.0.0", "an expert's pairs in turn over its instances (even split)", {},
      lrmoe::TensorPlace::Host);
}

}  // namespace

LRMOE_PLUGIN(describe)
