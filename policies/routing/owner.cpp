// Routing "owner": every pair goes to its expert's owner, ignoring replicas and capacity. The
// routing of fixed expert parallelism (DeepSpeed-MoE, Megatron-Core).

#include <lrmoe/plugin.hpp>

namespace {

class Owner : public lrmoe::RoutingPolicy {
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
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<Owner>("owner", "1.0.0", "every pair to its expert's owner");
}

}  // namespace

LRMOE_PLUGIN(describe)
