#pragma once
// Rotary position embedding (RoPE) with partial rotation: only the first
// rotary_dim = head_dim * partial_rotary dimensions of each head are rotated (GLM-4.5 rotates
// half), the rest pass through unchanged.

#include <torch/torch.h>

namespace lrmoe {

class RotaryEmbedding {
 public:
  RotaryEmbedding(int64_t head_dim, double partial_rotary, double theta);
  // x: [batch, heads, seq, head_dim]; positions 0..seq-1.
  torch::Tensor apply(const torch::Tensor& x) const;

 private:
  int64_t rotary_dim_;
  torch::Tensor inverse_frequencies_;  // [rotary_dim / 2], float64 for exact angles
};

}  // namespace lrmoe
