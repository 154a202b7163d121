#include "runner/capacity_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace lrmoe {

double dropped_fraction(const std::vector<PassLoads>& passes, double factor) {
  int64_t routed = 0;
  int64_t dropped = 0;
  for (const PassLoads& loads : passes) {
    int64_t pairs = 0;
    for (const int64_t n : loads) pairs += n;
    if (loads.empty() || pairs == 0) continue;
    const auto capacity = static_cast<int64_t>(
        std::ceil(static_cast<double>(pairs) / static_cast<double>(loads.size()) * factor));
    for (const int64_t n : loads) dropped += std::max<int64_t>(0, n - capacity);
    routed += pairs;
  }
  if (routed == 0) throw std::invalid_argument("no routed pairs to calibrate a capacity on");
  return static_cast<double>(dropped) / static_cast<double>(routed);
}

double capacity_factor_dropping(const std::vector<PassLoads>& passes, double fraction) {
  // dropped_fraction falls from 1 (factor 0: capacity 0) as the factor grows: bisect for the
  // smallest factor at or below `fraction`.
  double low = 0;
  double high = 1;
  while (dropped_fraction(passes, high) > fraction) high *= 2;
  while (high - low > 1e-4) {
    const double middle = (low + high) / 2;
    (dropped_fraction(passes, middle) > fraction ? low : high) = middle;
  }
  return high;
}

}  // namespace lrmoe
