#include "core/model/rotary_embedding.hpp"

#include <cmath>

namespace lrmoe {

RotaryEmbedding::RotaryEmbedding(int64_t head_dim, double partial_rotary, double theta)
    : rotary_dim_(
          static_cast<int64_t>(std::llround(static_cast<double>(head_dim) * partial_rotary))) {
  auto exponents =
      torch::arange(0, rotary_dim_, 2, torch::kFloat64) / static_cast<double>(rotary_dim_);
  inverse_frequencies_ = torch::pow(theta, -exponents);
}

torch::Tensor RotaryEmbedding::apply(const torch::Tensor& x) const {
  if (rotary_dim_ == 0) return x;
  const int64_t seq = x.size(2);
  auto positions = torch::arange(seq, torch::kFloat64);
  auto angles = torch::outer(positions, inverse_frequencies_);                // [seq, rot/2]
  angles = torch::cat({angles, angles}, -1).to(x.device(), x.scalar_type());  // [seq, rot]
  auto cos = angles.cos();
  auto sin = angles.sin();

  auto rotated = x.narrow(-1, 0, rotary_dim_);
  const int64_t half = rotary_dim_ / 2;
  // Pairs dimension i with i + rot/2 (the "rotate half" layout of Qwen3 and GLM checkpoints).
  auto rotate_half = torch::cat({-rotated.narrow(-1, half, half), rotated.narrow(-1, 0, half)}, -1);
  auto out = rotated * cos + rotate_half * sin;
  if (rotary_dim_ == x.size(-1)) return out;
  return torch::cat({out, x.narrow(-1, rotary_dim_, x.size(-1) - rotary_dim_)}, -1);
}

}  // namespace lrmoe
