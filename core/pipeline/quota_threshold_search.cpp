#include "core/pipeline/quota_threshold_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace lrmoe {

uint32_t score_key(float score) {
  if (score == 0.0F) score = 0.0F;  // -0 and +0 compare equal, so they share a key
  uint32_t bits = 0;
  std::memcpy(&bits, &score, sizeof bits);
  // Positive floats order as their bits; negative ones in reverse. Setting the sign bit of
  // positives and inverting negatives makes unsigned order the floats' order.
  return (bits & 0x80000000U) ? ~bits : (bits | 0x80000000U);
}

QuotaThresholdSearch::QuotaThresholdSearch(const torch::Tensor& experts,
                                           const torch::Tensor& scores, std::vector<int64_t> quota,
                                           const std::vector<int64_t>& pairs)
    : quota_(std::move(quota)) {
  const auto num_experts = static_cast<int64_t>(quota_.size());
  const torch::Tensor e = experts.to(torch::kCPU, torch::kInt64).contiguous();
  const torch::Tensor s = scores.to(torch::kCPU, torch::kFloat32).contiguous();
  const int64_t n = e.numel();
  if (n != s.numel())
    throw std::invalid_argument(
        fmt::format("QuotaThresholdSearch: {} experts but {} scores", n, s.numel()));
  if (n > std::numeric_limits<uint32_t>::max())
    throw std::invalid_argument(fmt::format("QuotaThresholdSearch: {} pairs, more than 2^32", n));
  if (!pairs.empty() && pairs.size() != quota_.size())
    throw std::invalid_argument(fmt::format("QuotaThresholdSearch: {} pair counts for {} experts",
                                            pairs.size(), quota_.size()));
  // The pairs run by expert (pair order): each expert's are one range.
  const int64_t* expert = e.data_ptr<int64_t>();
  begin_.assign(quota_.size() + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    if (expert[i] < 0 || expert[i] >= num_experts || (i > 0 && expert[i] < expert[i - 1]))
      throw std::invalid_argument(fmt::format(
          "QuotaThresholdSearch: expert {} of pair {} outside [0, {}) or out of pair order",
          expert[i], i, num_experts));
    ++begin_[static_cast<std::size_t>(expert[i]) + 1];
  }
  std::partial_sum(begin_.begin(), begin_.end(), begin_.begin());
  key_.resize(static_cast<std::size_t>(n));
  const float* score = s.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) key_[static_cast<std::size_t>(i)] = score_key(score[i]);
  side_.assign(static_cast<std::size_t>(n), 0);
  undecided_.resize(static_cast<std::size_t>(n));
  undecided_count_.assign(quota_.size(), 0);
  above_.assign(quota_.size(), 0);
  need_ = quota_;
  // An expert that keeps none of its pairs, or (its pairs over every process known) all of them,
  // needs no histogram: every pair is below, or above, its threshold.
  for (int64_t x = 0; x < num_experts; ++x) {
    const auto ex = static_cast<std::size_t>(x);
    const bool none = quota_[ex] <= 0, all = !pairs.empty() && quota_[ex] >= pairs[ex];
    if (!none && !all) {
      open_.push_back(x);
      continue;
    }
    std::fill(side_.begin() + begin_[ex], side_.begin() + begin_[ex + 1],
              static_cast<signed char>(none ? -1 : 1));
    above_[ex] = none ? 0 : pairs[ex];
    need_[ex] = 0;
  }
}

template <typename Visit>
void QuotaThresholdSearch::for_each_undecided(int64_t expert, Visit visit) const {
  const auto x = static_cast<std::size_t>(expert);
  if (rounds_.empty()) {  // every pair of an open expert is undecided before the first round
    for (int64_t i = begin_[x]; i < begin_[x + 1]; ++i) visit(static_cast<uint32_t>(i));
    return;
  }
  const uint32_t* pair = undecided_.data() + begin_[x];
  for (int64_t j = 0; j < undecided_count_[x]; ++j) visit(pair[j]);
}

torch::Tensor QuotaThresholdSearch::local_histogram() const {
  if (done()) throw std::logic_error("QuotaThresholdSearch: every threshold is known");
  auto histogram = torch::zeros({static_cast<int64_t>(open_.size()), kBins}, torch::kInt64);
  int64_t* bins = histogram.data_ptr<int64_t>();
  // The undecided pairs are those of open experts whose higher bytes match their threshold's.
  const int shift = byte_shift();
  for (std::size_t k = 0; k < open_.size(); ++k) {
    int64_t* row = bins + static_cast<int64_t>(k) * kBins;
    for_each_undecided(open_[k], [&](uint32_t i) { ++row[(key_[i] >> shift) & 0xFFU]; });
  }
  return histogram;
}

void QuotaThresholdSearch::narrow(const torch::Tensor& global_histogram) {
  const torch::Tensor histogram = global_histogram.to(torch::kCPU, torch::kInt64).contiguous();
  const auto rows = static_cast<int64_t>(open_.size());
  if (histogram.dim() != 2 || histogram.size(0) != rows || histogram.size(1) != kBins)
    throw std::logic_error(fmt::format(
        "QuotaThresholdSearch: a histogram of {} values for {} open experts of {} bins in round "
        "{}; the processes' histograms disagree",
        histogram.numel(), rows, kBins, rounds_.size()));
  const int64_t* bins = histogram.data_ptr<int64_t>();
  const int shift = byte_shift();
  const bool last_round = rounds_.size() + 1 == static_cast<std::size_t>(kRounds);
  std::vector<int64_t> still_open;
  for (int64_t k = 0; k < rows; ++k) {
    const int64_t expert = open_[static_cast<std::size_t>(k)];
    const auto e = static_cast<std::size_t>(expert);
    const int64_t* row = bins + k * kBins;
    if (rounds_.empty()) {  // a quota above the pairs keeps them all
      int64_t matching = 0;
      for (int64_t b = 0; b < kBins; ++b) matching += row[b];
      need_[e] = std::min(need_[e], matching);
    }
    // From the highest bin down, the bin where the need runs out holds the threshold. With
    // nothing needed it stays at bin 255 and keeps none of it (a key of 0xFF... is a NaN's or a
    // score of 2^127 or more).
    int64_t bin = kBins - 1;
    int64_t before = 0;
    if (need_[e] > 0) {
      while (before + row[bin] < need_[e]) {
        before += row[bin];
        if (--bin < 0)
          throw std::logic_error(fmt::format(
              "QuotaThresholdSearch: expert {} has fewer pairs in round {} than it still needs; "
              "the processes' histograms disagree",
              e, rounds_.size()));
      }
    }
    above_[e] += before;
    need_[e] -= before;
    // The bin is kept whole (the need is all of it) or not at all: its lower bytes decide
    // nothing, and its pairs are "at" the threshold, of which the need is kept.
    const bool open = need_[e] > 0 && need_[e] < row[bin] && !last_round;
    if (open) still_open.push_back(expert);
    // Each undecided pair's byte against its threshold's: above or below decides it for good; at
    // it, the pair stays undecided while its expert is open, and is at the threshold once closed.
    // The ones still undecided are written over the list as it is read.
    const auto threshold = static_cast<uint32_t>(bin);
    uint32_t* kept_undecided = undecided_.data() + begin_[e];
    int64_t still_undecided = 0;
    for_each_undecided(expert, [&](uint32_t i) {
      const uint32_t byte = (key_[i] >> shift) & 0xFFU;
      if (byte != threshold) {
        side_[i] = byte > threshold ? 1 : -1;
      } else if (open) {
        kept_undecided[still_undecided++] = i;
      }
    });
    undecided_count_[e] = still_undecided;
  }
  open_ = std::move(still_open);
  rounds_.push_back(rows);
}

int QuotaThresholdSearch::byte_shift() const {
  // Every undecided pair's expert has settled as many bits: a byte per round so far.
  return 24 - 8 * static_cast<int>(rounds_.size());
}

torch::Tensor QuotaThresholdSearch::local_groups(const torch::Tensor& home, int64_t ranks) const {
  if (!done()) throw std::logic_error("QuotaThresholdSearch: rounds remain");
  const torch::Tensor h = home.to(torch::kCPU, torch::kInt64).contiguous();
  if (h.numel() != static_cast<int64_t>(key_.size()))
    throw std::invalid_argument(
        fmt::format("QuotaThresholdSearch: {} home ranks for {} pairs", h.numel(), key_.size()));
  const auto num_experts = static_cast<int64_t>(quota_.size());
  auto groups = torch::zeros({2, ranks, num_experts}, torch::kInt64);
  int64_t* count = groups.data_ptr<int64_t>();
  const int64_t* rank = h.data_ptr<int64_t>();
  for (int64_t e = 0; e < num_experts; ++e) {
    // Above counts at row 0, at at row 1, below at neither: `at * ranks` steps a row on.
    int64_t* above = count + e;
    for (int64_t i = begin_[static_cast<std::size_t>(e)];
         i < begin_[static_cast<std::size_t>(e) + 1]; ++i) {
      const signed char side = side_[static_cast<std::size_t>(i)];
      if (side < 0) continue;
      above[((side == 0 ? ranks : 0) + rank[i]) * num_experts] += 1;
    }
  }
  return groups;
}

std::vector<int64_t> QuotaThresholdSearch::kept_groups(const torch::Tensor& summed_groups) const {
  const torch::Tensor groups = summed_groups.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t ranks = groups.size(1), num_experts = groups.size(2);
  const int64_t* above = groups.data_ptr<int64_t>();
  const int64_t* at = above + ranks * num_experts;
  std::vector<int64_t> kept(static_cast<std::size_t>(ranks * num_experts));
  std::vector<int64_t> need = need_;  // ties still to keep, per expert
  for (int64_t r = 0; r < ranks; ++r) {
    for (int64_t e = 0; e < num_experts; ++e) {
      const int64_t g = r * num_experts + e;
      const int64_t ties = std::min(at[g], need[static_cast<std::size_t>(e)]);
      need[static_cast<std::size_t>(e)] -= ties;
      kept[static_cast<std::size_t>(g)] = above[g] + ties;
    }
  }
  return kept;
}

torch::Tensor QuotaThresholdSearch::kept(const torch::Tensor& summed_groups,
                                         int64_t first_rank) const {
  if (!done()) throw std::logic_error("QuotaThresholdSearch: rounds remain");
  const torch::Tensor groups = summed_groups.to(torch::kCPU, torch::kInt64).contiguous();
  const auto num_experts = static_cast<int64_t>(quota_.size());
  const int64_t* at = groups.data_ptr<int64_t>() + groups.size(1) * num_experts;
  // Written in place and counted without a branch on the side, which the scores make random.
  torch::Tensor kept = torch::empty({static_cast<int64_t>(key_.size())}, torch::kInt64);
  int64_t* into = kept.data_ptr<int64_t>();
  int64_t count = 0;
  for (int64_t e = 0; e < num_experts; ++e) {
    const auto x = static_cast<std::size_t>(e);
    // The expert's ties at home ranks before this process's are kept first.
    int64_t tie_rank = 0;
    for (int64_t r = 0; r < first_rank; ++r) tie_rank += at[r * num_experts + e];
    const int64_t need = need_[x];
    for (int64_t i = begin_[x]; i < begin_[x + 1]; ++i) {
      const signed char side = side_[static_cast<std::size_t>(i)];
      const bool tie = side == 0;
      const bool keep = side > 0 || (tie && tie_rank < need);
      tie_rank += tie ? 1 : 0;
      into[count] = i;
      count += keep ? 1 : 0;
    }
  }
  return kept.narrow(0, 0, count);
}

KeptOverProcesses kept_over_processes(Collectives& collectives, const torch::Tensor& experts,
                                      const torch::Tensor& home, const torch::Tensor& scores,
                                      std::vector<int64_t> quota, const std::vector<int64_t>& pairs,
                                      int64_t ranks, const ProcessView& process) {
  QuotaThresholdSearch search(experts, scores, std::move(quota), pairs);
  while (!search.done()) {
    torch::Tensor histogram = search.local_histogram();
    collectives.sum(histogram);
    search.narrow(histogram);
  }
  // Every home rank's pairs above and at the threshold: the kept groups, and the ties of the
  // processes before this one, in one all-reduce.
  torch::Tensor groups = search.local_groups(home, ranks);
  collectives.sum(groups);
  return {search.kept(groups, process.first_rank()).to(experts.device()),
          search.kept_groups(groups), search.rounds()};
}

}  // namespace lrmoe
