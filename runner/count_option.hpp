#pragma once
// The check of a command-line count (steps, processes, rounds, run ids): a whole number within
// its range, read exactly, refused in one line that states the range as people write it. CLI11's
// own PositiveNumber states it as a 310-digit double, and its integer conversion reads "" as 0
// and a number past 2^63 as 2^63-1.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>

namespace lrmoe {

// A whole number from `low` to `high` ("at least `low`" when `high` is the largest int64).
CLI::Validator count_between(int64_t low, int64_t high = std::numeric_limits<int64_t>::max());

}  // namespace lrmoe
