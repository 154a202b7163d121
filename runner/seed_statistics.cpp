#include "runner/seed_statistics.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace lrmoe {
namespace {

double median_of_sorted(const std::vector<double>& sorted) {
  const std::size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return median_of_sorted(values);
}

double reduction(double variant, double baseline) {
  return 1.0 - variant / baseline;
}

// The value at fraction `q` of the sorted values (nearest rank).
double percentile(const std::vector<double>& sorted, double q) {
  const auto last = static_cast<double>(sorted.size() - 1);
  return sorted[static_cast<std::size_t>(std::lround(q * last))];
}

}  // namespace

SeedSpread seed_spread(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return {median_of_sorted(values), values.front(), values.back()};
}

std::optional<Reduction> bootstrap_reduction(const std::vector<double>& variant,
                                             const std::vector<double>& baseline, int64_t resamples,
                                             uint64_t seed) {
  if (variant.empty() || baseline.empty()) return std::nullopt;
  const double base = median(baseline);
  if (base == 0 || !std::isfinite(base)) return std::nullopt;
  std::mt19937_64 generator(seed);
  auto resample = [&](const std::vector<double>& values) {
    std::uniform_int_distribution<std::size_t> pick(0, values.size() - 1);
    std::vector<double> drawn(values.size());
    for (double& v : drawn) v = values[pick(generator)];
    return median(std::move(drawn));
  };
  std::vector<double> reductions;
  for (int64_t i = 0; i < resamples; ++i) {
    const double v = resample(variant), b = resample(baseline);
    const double r = reduction(v, b);
    if (!std::isnan(r)) reductions.push_back(r);  // both sides censored: no figure
  }
  Reduction result;
  result.estimate = reduction(median(variant), base);
  if (reductions.empty()) {
    result.low = result.high = result.estimate;
    return result;
  }
  std::sort(reductions.begin(), reductions.end());
  result.low = percentile(reductions, 0.025);
  result.high = percentile(reductions, 0.975);
  return result;
}

}  // namespace lrmoe
