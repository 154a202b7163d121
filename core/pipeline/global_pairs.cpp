#include "core/pipeline/global_pairs.hpp"

#include <algorithm>

#include "core/pipeline/stable_order.hpp"

namespace lrmoe {

GlobalPairs gather_pairs(Collectives& collectives, const torch::Tensor& experts,
                         const torch::Tensor& gates, const torch::Tensor& home) {
  GlobalPairs pairs;
  if (collectives.single()) {
    pairs.experts = experts;
    pairs.gates = gates.detach().to(torch::kFloat32);
    pairs.home = home;
    pairs.source_row = identity_order(experts.numel(), experts.options().dtype(torch::kInt64));
    pairs.pair_ids = pairs.source_row;
    return pairs;
  }
  // One gather: expert ids, home ranks and float32 gates are all exact in float64.
  const torch::Tensor local = torch::stack(
      {experts.to(torch::kFloat64), home.to(torch::kFloat64), gates.detach().to(torch::kFloat64)},
      1);
  // Every process routes as many tokens, each to top-k experts: as many pairs.
  const std::vector<int64_t> counts(static_cast<std::size_t>(collectives.size()), local.size(0));
  const torch::Tensor all = collectives.gather_rows(local, counts);
  const torch::Tensor all_experts = all.select(1, 0).to(torch::kInt64);
  // Stable over the process-ordered rows: pair order, the same on every process (Note [Pair
  // order] in docs/notes.md).
  const torch::Tensor order = std::get<1>(torch::sort(all_experts, /*stable=*/true, 0, false));
  pairs.experts = all_experts.index_select(0, order);
  pairs.home = all.select(1, 1).to(torch::kInt64).index_select(0, order);
  pairs.gates = all.select(1, 2).to(torch::kFloat32).index_select(0, order);
  // A pair's id is its place in pair order, the one-process order (Note [Pair order]).
  pairs.pair_ids = identity_order(order.numel(), order.options());
  pairs.source_row = order.remainder(std::max<int64_t>(1, local.size(0)));  // no rows: none
  return pairs;
}

torch::Tensor gather_in_pair_order(Collectives& collectives, const torch::Tensor& local,
                                   const torch::Tensor& home_process,
                                   const std::vector<int64_t>& rows_per_process) {
  if (collectives.single()) return local;
  // The gather concatenates by process; within a process the rows are in pair order.
  const torch::Tensor by_process = stable_order(home_process, collectives.size());
  const torch::Tensor all = collectives.gather_rows(local, rows_per_process);
  return torch::empty_like(all).index_copy_(0, by_process, all);
}

}  // namespace lrmoe
