#pragma once
// cluster.memory_per_rank: a size ("80GiB", "512MB", bytes) or a multiple of what fixed
// ownership needs ("0.8x fixed"), so that an experiment can make the budget bind whatever the
// model's size. The multiple is resolved against the model in core/pipeline/rank_budget.cpp.

#include <cstdint>
#include <string>
#include <string_view>

namespace lrmoe {

struct MemorySpec {
  uint64_t bytes = 0;      // an absolute size, or 0
  double times_fixed = 0;  // a multiple of fixed ownership's need, or 0
};

// Throws std::invalid_argument saying what is wrong and what is accepted.
MemorySpec parse_memory_spec(std::string_view text);

}  // namespace lrmoe
