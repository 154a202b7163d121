#pragma once
// Turning windows of seq_len + 1 tokens into a training pair: every source fills a
// [batch, seq_len + 1] tensor and lets this cut it, so the shift is defined once.

#include <torch/torch.h>

#include "core/data/token_source.hpp"

namespace lrmoe {

// inputs = windows[:, :-1], targets = windows[:, 1:], both contiguous int64.
inline Batch batch_from_windows(const torch::Tensor& windows) {
  const int64_t seq_len = windows.size(1) - 1;
  return Batch{windows.narrow(1, 0, seq_len).contiguous(),
               windows.narrow(1, 1, seq_len).contiguous()};
}

}  // namespace lrmoe
