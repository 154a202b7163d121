#pragma once
// The stable sorting order of small integer keys: expert, instance, rank and process ids, which
// the plan sorts pairs by several times a pass. On the CPU a counting sort, one pass to count
// and one to place (O(n + bins)), where a comparison sort of a layer's pairs was most of the
// plan's host time at full dimensions (Note [Replay]); elsewhere torch::sort, stable. Both give
// the same order: ties keep their order.

#include <torch/torch.h>

#include <cstdint>

namespace lrmoe {

// [n] int64 positions that sort `keys` ([n] int64, each in [0, bins)) stably, on keys' device.
torch::Tensor stable_order(const torch::Tensor& keys, int64_t bins);

}  // namespace lrmoe
