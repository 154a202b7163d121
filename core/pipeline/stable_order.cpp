#include "core/pipeline/stable_order.hpp"

#include <vector>

namespace lrmoe {

torch::Tensor stable_order(const torch::Tensor& keys, int64_t bins) {
  if (!keys.device().is_cpu())
    return std::get<1>(torch::sort(keys, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  const torch::Tensor contiguous = keys.contiguous();
  const int64_t n = contiguous.numel();
  const int64_t* key = contiguous.data_ptr<int64_t>();
  std::vector<int64_t> next(static_cast<std::size_t>(bins) + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    TORCH_CHECK(key[i] >= 0 && key[i] < bins, "stable_order: key ", key[i], " outside [0, ", bins,
                ")");
    ++next[static_cast<std::size_t>(key[i]) + 1];
  }
  for (std::size_t b = 1; b < next.size(); ++b) next[b] += next[b - 1];
  torch::Tensor order = torch::empty({n}, contiguous.options());
  int64_t* position = order.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) position[next[static_cast<std::size_t>(key[i])]++] = i;
  return order;
}

}  // namespace lrmoe
