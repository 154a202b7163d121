#pragma once
// Orders of pairs. The stable sorting order of integer keys: expert, instance, rank, process and
// chunk ids, which the plan sorts pairs by several times a pass. On the CPU a counting sort, one
// pass to count and one to place (O(n + bins)), where a comparison sort of a layer's pairs was
// most of the plan's host time at full dimensions (Note [Replay]); elsewhere torch::sort,
// stable. Both give the same order: ties keep their order. And the inverse
// of an order, which says where each pair went, and values taken in an order: on the CPU loops
// over the pairs, where LibTorch's per-operation cost was much of a pass's plan at full size.

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace lrmoe {

// The most bins stable_order counts in: its keys are ids of experts, instances, ranks, processes
// and chunks, never near so many.
constexpr int64_t kMostOrderBins = int64_t{1} << 24;

// [n] int64 positions that sort `keys` ([n] int64, each in [0, bins)) stably, on keys' device.
// On the CPU, bins up to kMostOrderBins.
torch::Tensor stable_order(const torch::Tensor& keys, int64_t bins);

// [n] int64 0, 1, ..., n - 1 with `options`' device: the order that leaves n pairs as they are.
// On the CPU a view of one count the thread shares among all its identity orders (and any other
// view of it a caller narrows, such as a range of ids), so it is read-only: nothing may write
// into an order, or into a tensor it was given as (a pass's kept pairs, a slice's rows), in
// place. A loop wrote the count, where LibTorch's arange took several times as long.
torch::Tensor identity_order(int64_t n, const torch::TensorOptions& options);

// [n] int64 `inverse` with inverse[order[k]] = k, on order's device; order: [n] int64, a
// permutation of 0..n-1.
torch::Tensor inverse_permutation(const torch::Tensor& order);

// values.index_select(0, order): [k, ...] of [n, ...] int64 values at the [k] int64 positions
// `order`, on values' device.
torch::Tensor take_rows(const torch::Tensor& values, const torch::Tensor& order);

}  // namespace lrmoe
