#include "core/pipeline/home_pass.hpp"

#include <limits>
#include <utility>

#include "core/pipeline/count_layout.hpp"
#include "core/pipeline/expert_counts.hpp"
#include "core/pipeline/stable_order.hpp"
#include "core/pipeline/summed_counts.hpp"
#include "lrmoe/static_owners.hpp"

namespace lrmoe {

std::shared_ptr<const ForwardPass> home_pass(const torch::Tensor& experts,
                                             const torch::Tensor& home, int64_t num_experts,
                                             int64_t ranks, const ProcessView& process,
                                             Collectives& collectives) {
  const int64_t E = num_experts;
  PlacementPlan owners;
  owners.instances = static_owners(E, ranks);
  owners.quota.assign(static_cast<std::size_t>(E), std::numeric_limits<int64_t>::max());
  auto table = std::make_shared<InstanceTable>(build_instance_table(
      owners, E, ranks, owned_experts_per_rank(E, ranks), "static owners (evaluation)"));
  table->place_on(experts.device());

  // Static owners in (rank, slot) order are in expert order: instance e is expert e, so the
  // pairs per (home rank, expert) are the routed pairs per (home rank, instance).
  std::vector<int64_t> routed =
      summed_over_processes(collectives, pair_order_group_counts(home, ranks, experts, E));
  auto pass = std::make_shared<ForwardPass>();
  pass->computed = identity_order(experts.numel(), experts.options());
  pass->local_pairs = pass->computed;
  pass->experts = experts;
  pass->home = home;
  pass->table = table;
  // Not split in chunks: no pair's instance is read.
  pass->layout = count_pair_layout(std::move(routed), experts.numel(), experts.device(), *table,
                                   ranks, process, /*with_instances=*/false);
  return pass;
}

}  // namespace lrmoe
