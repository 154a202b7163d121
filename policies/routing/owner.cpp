// Routing "owner": every pair goes to its expert's owner, ignoring replicas and capacity. The
// routing of fixed expert parallelism (DeepSpeed-MoE, Megatron-Core). A count routing.

#include <lrmoe/plugin.hpp>

namespace {

class Owner : public lrmoe::CountRoutingPolicy {
 public:
  explicit Owner(const lrmoe::Parameters&) {}
  at::Tensor route(const lrmoe::RoutingRequest& request) override {
    std::vector<int64_t> owners;
    owners.reserve(request.expert_instances.size());
    for (const std::vector<int64_t>& instances : request.expert_instances) {
      owners.push_back(instances.front());  // the owner comes first
    }
    return at::tensor(owners, at::kLong)
        .to(request.experts.device())
        .index_select(0, request.experts);
  }

  std::vector<int64_t> route_counts(const lrmoe::CountRoutingRequest& request) override {
    const auto E = static_cast<size_t>(request.num_experts);
    const size_t I = request.instances.size();
    std::vector<int64_t> routed(static_cast<size_t>(request.ranks) * I, 0);
    for (size_t h = 0; h < static_cast<size_t>(request.ranks); ++h) {
      for (size_t e = 0; e < E; ++e) {
        const auto owner = static_cast<size_t>(request.expert_instances[e].front());
        routed[h * I + owner] = request.pairs[h * E + e];
      }
    }
    return routed;
  }
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<Owner>("owner", "1.1.0", "every pair to its expert's owner");
}

}  // namespace

LRMOE_PLUGIN(describe)
