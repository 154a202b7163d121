#pragma once
// Which TOML numbers a key can take without changing value: a whole number given for a float key
// must be exactly a double, and no number may be infinite or NaN. A rounded or non-finite value
// would train silently on something the user did not write.

#include <cmath>
#include <cstdint>
#include <string>

namespace lrmoe {

// 2^53: every whole number of this magnitude or less is exactly a double; 2^53 + 1 is not.
inline constexpr int64_t kLargestExactWholeDouble = int64_t{1} << 53;

constexpr bool exact_as_double(int64_t value) {
  return value >= -kLargestExactWholeDouble && value <= kLargestExactWholeDouble;
}

// Why `value` cannot be taken as a float, or empty when it can.
inline std::string whole_number_as_double_problem(int64_t value) {
  if (exact_as_double(value)) return {};
  return "must be a number a double holds exactly, got " + std::to_string(value) +
         ", which has more than 53 significant bits; write it as a float (e.g. 9.0e15)";
}

inline std::string non_finite_problem(double value) {
  if (std::isfinite(value)) return {};
  return std::string("must be a finite number, got ") +
         (std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf"));
}

}  // namespace lrmoe
