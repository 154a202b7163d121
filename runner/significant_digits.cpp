#include "runner/significant_digits.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace lrmoe {

std::string significant_text(double value, int digits) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "∞" : "-∞";
  if (value == std::trunc(value) && std::fabs(value) < 1e15) return fmt::format("{:.0f}", value);
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(value))));
  const int decimals = std::max(0, digits - 1 - magnitude);
  return fmt::format("{:.{}f}", value, decimals);
}

}  // namespace lrmoe
