#pragma once
// Learning rate: linear warm-up from lr / warmup_steps to lr over warmup_steps, then cosine decay
// to min_lr at max_steps.

#include <cstdint>

#include "core/config/train_config.hpp"

namespace lrmoe {

// step counts from 1.
double learning_rate(const TrainConfig& train, int64_t step);

}  // namespace lrmoe
