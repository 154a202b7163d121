#pragma once
// Figures over the seeds of one policy variant (lrmoe compare). A run that did not reach the
// target counts as +infinity for its time to target (a censored value): the median stays finite
// while fewer than half of the seeds missed, and the range says that some did.

#include <cstdint>
#include <optional>
#include <vector>

namespace lrmoe {

struct SeedSpread {
  double median = 0;
  double low = 0;   // the smallest
  double high = 0;  // the largest (+infinity when a seed did not reach the target)
};

// Of `values`, which must not be empty.
SeedSpread seed_spread(std::vector<double> values);

// 1 - median(variant) / median(baseline): the fraction by which the variant reduces a figure
// against the baseline (negative: it increases it), with a percentile bootstrap interval that
// resamples each side's seeds with replacement.
struct Reduction {
  double estimate = 0;
  double low = 0;   // 2.5th percentile of the resampled reductions
  double high = 0;  // 97.5th
};

// None when the baseline's median is zero or not finite, or either side is empty. The
// resampling is seeded: the same runs give the same interval.
std::optional<Reduction> bootstrap_reduction(const std::vector<double>& variant,
                                             const std::vector<double>& baseline,
                                             int64_t resamples = 2000, uint64_t seed = 0);

}  // namespace lrmoe
