#include "core/pipeline/forward_capacity.hpp"

#include <algorithm>

#include "core/pipeline/expert_counts.hpp"

namespace lrmoe {

torch::Tensor within_forward_capacity(const torch::Tensor& experts, const torch::Tensor& gates,
                                      const std::vector<int64_t>& counts,
                                      const std::vector<int64_t>& capacity) {
  // Descending gate, then stably by expert: each expert's pairs by falling gate, one run each.
  auto by_gate = std::get<1>(
      torch::sort(gates.detach().to(torch::kCPU), /*stable=*/true, 0, /*descending=*/true));
  auto order = by_gate.index_select(
      0, std::get<1>(torch::sort(experts.index_select(0, by_gate), /*stable=*/true, 0, false)));
  const std::vector<int64_t> offsets = offsets_from_counts(counts);
  std::vector<int64_t> keep;
  const int64_t* ordered = order.data_ptr<int64_t>();
  for (std::size_t e = 0; e < counts.size(); ++e) {
    const int64_t n = std::min(counts[e], capacity[e]);
    keep.insert(keep.end(), ordered + offsets[e], ordered + offsets[e] + n);
  }
  std::sort(keep.begin(), keep.end());
  return torch::tensor(keep, torch::kInt64);
}

}  // namespace lrmoe
