#include "core/pipeline/stable_order.hpp"

#include <algorithm>
#include <array>
#include <numeric>
#include <vector>

namespace lrmoe {

torch::Tensor stable_order(const torch::Tensor& keys, int64_t bins) {
  if (!keys.device().is_cpu())
    return std::get<1>(torch::sort(keys, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  TORCH_CHECK(bins >= 0 && bins <= kMostOrderBins, "stable_order: ", bins,
              " bins, more than a counting sort's ", kMostOrderBins);
  // A column of a wider tensor is read in place, at its stride.
  const torch::Tensor flat = keys.dim() == 1 ? keys : keys.contiguous();
  const int64_t n = flat.numel();
  const int64_t stride = keys.dim() == 1 ? flat.stride(0) : 1;
  const int64_t* key = flat.data_ptr<int64_t>();
  torch::Tensor order = torch::empty({n}, flat.options());
  int64_t* to = order.data_ptr<int64_t>();
  // One pass counts (checking each key), one places.
  std::vector<int64_t> next(static_cast<std::size_t>(bins) + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    TORCH_CHECK(key[i * stride] >= 0 && key[i * stride] < bins, "stable_order: key ",
                key[i * stride], " outside [0, ", bins, ")");
    ++next[static_cast<std::size_t>(key[i * stride]) + 1];
  }
  std::partial_sum(next.begin(), next.end(), next.begin());
  for (int64_t i = 0; i < n; ++i) to[next[static_cast<std::size_t>(key[i * stride])]++] = i;
  return order;
}

torch::Tensor identity_order(int64_t n, const torch::TensorOptions& options) {
  const torch::TensorOptions int64 = options.dtype(torch::kInt64);
  if (!int64.device().is_cpu()) return torch::arange(n, int64);
  // One count per thread (a replay thread stands for a process), grown by doubling; every order
  // is a prefix of it. Writing 0..n-1 afresh, into memory fresh from the allocator, was 8% of
  // SYMI's scalable plan at full dimensions on 16 ranks in a profile.
  thread_local torch::Tensor counted;
  // And the last views handed out, by length: a layer asks for the same few lengths again and
  // again, and LibTorch's narrow, through its dispatcher, was 2.5% of LRMoE's plan in a profile.
  // A view handed out twice is as safe as the count: nothing changes an order in place. A view
  // of a count since outgrown still holds 0..n-1.
  constexpr std::size_t kRecent = 8;
  thread_local std::array<torch::Tensor, kRecent> recent;
  thread_local std::size_t next = 0;
  for (const torch::Tensor& view : recent)
    if (view.defined() && view.numel() == n) return view;
  if (!counted.defined() || counted.numel() < n) {
    const int64_t size = std::max(n, counted.defined() ? 2 * counted.numel() : int64_t{0});
    counted = torch::empty({size}, int64);
    int64_t* row = counted.data_ptr<int64_t>();
    std::iota(row, row + size, int64_t{0});
  }
  torch::Tensor view = counted.narrow(0, 0, n);
  recent[next++ % kRecent] = view;
  return view;
}

torch::Tensor inverse_permutation(const torch::Tensor& order) {
  if (!order.device().is_cpu())
    return torch::empty_like(order).index_copy_(0, order,
                                                identity_order(order.numel(), order.options()));
  const torch::Tensor contiguous = order.contiguous();
  const int64_t n = contiguous.numel();
  const int64_t* at = contiguous.data_ptr<int64_t>();
  torch::Tensor inverse = torch::empty({n}, contiguous.options());
  int64_t* place = inverse.data_ptr<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    TORCH_CHECK(at[k] >= 0 && at[k] < n, "inverse_permutation: ", at[k], " outside [0, ", n, ")");
    place[at[k]] = k;
  }
  return inverse;
}

torch::Tensor take_rows(const torch::Tensor& values, const torch::Tensor& order) {
  if (!values.device().is_cpu() || !order.device().is_cpu() ||
      values.scalar_type() != torch::kInt64 || values.dim() == 0)
    return values.index_select(0, order);
  // A column of a wider tensor is read in place, at its stride.
  const torch::Tensor from = values.dim() == 1 ? values : values.contiguous();
  const torch::Tensor at = order.contiguous();
  const int64_t n = from.size(0), k = at.numel();
  const int64_t width = n == 0 ? 0 : from.numel() / n;  // values per row
  const int64_t stride = values.dim() == 1 ? from.stride(0) : width;
  std::vector<int64_t> shape = from.sizes().vec();
  shape[0] = k;
  torch::Tensor taken = torch::empty(shape, from.options());
  const int64_t* source = from.data_ptr<int64_t>();
  const int64_t* position = at.data_ptr<int64_t>();
  int64_t* into = taken.data_ptr<int64_t>();
  for (int64_t j = 0; j < k; ++j) {
    TORCH_CHECK(position[j] >= 0 && position[j] < n, "take_rows: position ", position[j],
                " outside [0, ", n, ")");
    if (width == 1) {
      into[j] = source[position[j] * stride];
    } else {
      std::copy_n(source + position[j] * width, width, into + j * width);
    }
  }
  return taken;
}

}  // namespace lrmoe
