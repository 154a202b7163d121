#include "runner/sparkline.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>

namespace lrmoe {
namespace {

constexpr std::array<const char*, 8> kLevels = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};

// The mean of the finite values in each of `buckets` consecutive slices of `values`.
std::vector<std::optional<double>> bucket_means(const std::vector<double>& values, size_t buckets) {
  std::vector<std::optional<double>> means;
  for (size_t bucket = 0; bucket < buckets; ++bucket) {
    const size_t begin = bucket * values.size() / buckets;
    const size_t end = (bucket + 1) * values.size() / buckets;
    double sum = 0;
    size_t count = 0;
    for (size_t i = begin; i < end; ++i) {
      if (!std::isfinite(values[i])) continue;
      sum += values[i];
      ++count;
    }
    means.push_back(count ? std::optional<double>(sum / static_cast<double>(count)) : std::nullopt);
  }
  return means;
}

}  // namespace

std::string sparkline(const std::vector<double>& values, size_t width) {
  const std::vector<std::optional<double>> means =
      bucket_means(values, std::min(width, values.size()));
  double low = std::numeric_limits<double>::infinity();
  double high = -low;
  for (const auto& mean : means) {
    if (!mean) continue;
    low = std::min(low, *mean);
    high = std::max(high, *mean);
  }
  const double top_level = static_cast<double>(kLevels.size() - 1);
  std::string line;
  for (const auto& mean : means) {
    if (!mean) {
      line += ' ';
      continue;
    }
    const double position = high > low ? (*mean - low) / (high - low) : 0.0;
    line += kLevels[static_cast<size_t>(std::lround(position * top_level))];
  }
  return line;
}

}  // namespace lrmoe
