#include "core/train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

namespace lrmoe {

double learning_rate(const TrainConfig& t, int64_t step) {
  if (step <= t.warmup_steps)
    return t.lr * static_cast<double>(step) / static_cast<double>(t.warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, t.max_steps - t.warmup_steps);
  const double progress =
      std::min(1.0, static_cast<double>(step - t.warmup_steps) / static_cast<double>(decay_steps));
  const double pi = std::acos(-1.0);
  return t.min_lr + 0.5 * (t.lr - t.min_lr) * (1.0 + std::cos(pi * progress));
}

}  // namespace lrmoe
