#include "core/data/held_out_split.hpp"

#include <algorithm>
#include <utility>

namespace lrmoe {

SplitSegments::SplitSegments(std::vector<TokenSegment> segments, int64_t window)
    : segments_(std::move(segments)), window_(window) {
  for (const TokenSegment& s : segments_)
    starts_before_.push_back(starts_before_.back() + std::max<int64_t>(0, s.size() - window + 1));
}

int64_t SplitSegments::tokens() const {
  int64_t sum = 0;
  for (const TokenSegment& s : segments_) sum += s.size();
  return sum;
}

int64_t SplitSegments::start(int64_t index) const {
  // The segment whose starts include `index`: the last with fewer starts before it.
  const auto after = std::upper_bound(starts_before_.begin(), starts_before_.end(), index);
  const auto segment = static_cast<std::size_t>(after - starts_before_.begin() - 1);
  return segments_[segment].begin + (index - starts_before_[segment]);
}

HeldOutSplit held_out_split(int64_t total, double val_fraction, int64_t window) {
  const auto val_size = static_cast<int64_t>(static_cast<double>(total) * val_fraction);
  const int64_t train_size = total - val_size;
  const int64_t parts = std::clamp<int64_t>(
      std::min(val_size, train_size) / (kMinPartWindows * window), 1, kMaxValidationSegments);
  std::vector<TokenSegment> train, validation;
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t part_begin = p * total / parts, part_end = (p + 1) * total / parts;
    // The validation tails add up to val_size exactly, whatever the rounding of the parts.
    const int64_t tail = (p + 1) * val_size / parts - p * val_size / parts;
    train.push_back({part_begin, part_end - tail});
    validation.push_back({part_end - tail, part_end});
  }
  return {SplitSegments(std::move(train), window), SplitSegments(std::move(validation), window)};
}

}  // namespace lrmoe
