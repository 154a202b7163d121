// Routing "capacity_aware": LRMoE's routing of pairs over the eligible instances (owner and
// replicas) of their expert, filling the rank with the most room left first within each rank's
// capacity.
//
// Rank loads start at 0. Experts are served in increasing order of their number of instances
// (equal: lower expert index), because an expert with fewer instances has fewer places to go and
// must claim them before the flexible experts fill them; each expert's pairs are served in pair
// order. A pair goes to the instance of its expert whose rank has the most room left (capacity
// minus the pairs routed there so far) among the ranks still under capacity; with equal
// capacities that is the least-loaded rank. On equal room it prefers the pair's home rank (its
// token needs no transfer), then the lower instance index. Room, not load: under a memory budget
// the ranks' capacities differ (replicas and forward buffers take their share), and a rank that
// fills up early forces its unreplicated experts' pairs over its capacity. When every instance's
// rank is full, the pair still goes to the one with the least overflow (same preferences), and
// the runner reports the overflow.

#include <lrmoe/plugin.hpp>

#include <numeric>
#include <stdexcept>
#include <string>
#include <tuple>

namespace {

class CapacityAware : public lrmoe::RoutingPolicy {
 public:
  explicit CapacityAware(const lrmoe::Parameters&) {}

  at::Tensor route(const lrmoe::RoutingRequest& request) override {
    if (static_cast<int64_t>(request.capacity.size()) != request.ranks) {
      throw std::invalid_argument("capacity_aware routing needs one capacity per rank, got " +
                                  std::to_string(request.capacity.size()) + " for " +
                                  std::to_string(request.ranks) + " ranks");
    }
    const at::Tensor experts = request.experts.contiguous();
    const at::Tensor home_ranks = request.home_ranks.contiguous();
    const int64_t* expert = experts.data_ptr<int64_t>();
    const int64_t* home = home_ranks.data_ptr<int64_t>();
    const size_t num_experts = request.expert_instances.size();

    std::vector<std::vector<int64_t>> pairs_of(num_experts);
    for (int64_t i = 0; i < experts.numel(); ++i) {
      pairs_of[static_cast<size_t>(expert[i])].push_back(i);
    }
    std::vector<size_t> order(num_experts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return request.expert_instances[a].size() < request.expert_instances[b].size();
    });

    at::Tensor routed = at::empty({experts.numel()}, at::kLong);
    int64_t* chosen = routed.data_ptr<int64_t>();
    std::vector<int64_t> load(static_cast<size_t>(request.ranks), 0);
    for (const size_t e : order) {
      for (const int64_t pair : pairs_of[e]) {
        // The smallest key wins: a rank under capacity, then more room, the home rank, the
        // lower instance index.
        auto key = [&](int64_t instance) {
          const int64_t rank = request.instances[static_cast<size_t>(instance)].rank;
          const auto r = static_cast<size_t>(rank);
          return std::make_tuple(load[r] >= request.capacity[r], load[r] - request.capacity[r],
                                 rank != home[pair], instance);
        };
        int64_t best = request.expert_instances[e].front();
        for (const int64_t instance : request.expert_instances[e]) {
          if (key(instance) < key(best)) {
            best = instance;
          }
        }
        chosen[pair] = best;
        ++load[static_cast<size_t>(request.instances[static_cast<size_t>(best)].rank)];
      }
    }
    return routed;
  }
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<CapacityAware>(
      "capacity_aware", "1.1.0",
      "each pair to the rank with the most room among its expert's instances, within capacity", {},
      lrmoe::TensorPlace::Host);
}

}  // namespace

LRMOE_PLUGIN(describe)
