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

std::vector<int64_t> home_group_offsets(const std::vector<int64_t>& groups, int64_t num_experts,
                                        const ProcessView& process) {
  std::vector<int64_t> offsets(1, 0);
  for (int64_t e = 0; e < num_experts; ++e)
    for (int64_t h = process.first_rank(); h < process.first_rank() + process.ranks_per_process;
         ++h)
      offsets.push_back(offsets.back() + groups.at(static_cast<std::size_t>(h * num_experts + e)));
  return offsets;
}

QuotaThresholdSearch::QuotaThresholdSearch(std::vector<int64_t> group_offsets,
                                           const ProcessView& process, const torch::Tensor& scores,
                                           std::vector<int64_t> quota,
                                           const std::vector<int64_t>& pairs)
    : process_(process),
      group_offsets_(std::move(group_offsets)),
      num_experts_(static_cast<int64_t>(quota.size())),
      quota_(std::move(quota)),
      pairs_known_(!pairs.empty()) {
  const torch::Tensor s = scores.to(torch::kCPU, torch::kFloat32).contiguous();
  const int64_t n = s.numel();
  if (static_cast<int64_t>(group_offsets_.size()) !=
          num_experts_ * process_.ranks_per_process + 1 ||
      group_offsets_.front() != 0 || group_offsets_.back() != n ||
      !std::is_sorted(group_offsets_.begin(), group_offsets_.end()))
    throw std::invalid_argument(fmt::format(
        "QuotaThresholdSearch: {} group offsets for {} experts of {} home ranks do not cover {} "
        "pairs in order",
        group_offsets_.size(), num_experts_, process_.ranks_per_process, n));
  if (n > std::numeric_limits<uint32_t>::max())
    throw std::invalid_argument(fmt::format("QuotaThresholdSearch: {} pairs, more than 2^32", n));
  if (!pairs.empty() && pairs.size() != quota_.size())
    throw std::invalid_argument(fmt::format("QuotaThresholdSearch: {} pair counts for {} experts",
                                            pairs.size(), quota_.size()));
  for (std::size_t e = 0; e < pairs.size(); ++e)
    if (pairs[e] > std::numeric_limits<Count>::max())
      throw std::invalid_argument(fmt::format(
          "QuotaThresholdSearch: expert {} has {} pairs, more than a bin counts", e, pairs[e]));
  // Left uninitialised: only an open expert's keys and list are written, then read.
  key_.reset(new uint32_t[static_cast<std::size_t>(n)]);
  undecided_.reset(new uint32_t[static_cast<std::size_t>(n)]);
  undecided_count_.assign(quota_.size(), 0);
  decided_.assign(quota_.size(), Decided::ByKey);
  prefix_.assign(quota_.size(), 0);
  prefix_shift_.assign(quota_.size(), 0);
  above_.assign(quota_.size(), 0);
  need_ = quota_;
  // An expert that keeps none of its pairs, or (its pairs over every process known) all of them,
  // needs no histogram: every pair is below, or above, its threshold.
  for (int64_t x = 0; x < num_experts_; ++x) {
    const auto ex = static_cast<std::size_t>(x);
    const bool none = quota_[ex] <= 0, all = !pairs.empty() && quota_[ex] >= pairs[ex];
    if (!none && !all) {
      open_.push_back(x);
      continue;
    }
    decided_[ex] = none ? Decided::None : Decided::All;
    above_[ex] = none ? 0 : pairs[ex];
    need_[ex] = 0;
  }
  // The first round's histogram is counted as the keys are made: one pass over the pairs, not
  // two.
  const float* score = s.data_ptr<float>();
  const int shift = byte_shift();
  histogram_ = torch::empty({static_cast<int64_t>(open_.size()), kBins}, torch::kInt32);
  for (std::size_t k = 0; k < open_.size(); ++k) {
    Count* row = zeroed_row(histogram_, static_cast<int64_t>(k));
    for (int64_t i = begin(open_[k]), stop = end(open_[k]); i < stop; ++i) {
      const uint32_t key = score_key(score[i]);
      key_[static_cast<std::size_t>(i)] = key;
      ++row[(key >> shift) & 0xFFU];
    }
  }
}

QuotaThresholdSearch::Count* QuotaThresholdSearch::zeroed_row(torch::Tensor& histogram,
                                                              int64_t row) {
  Count* bins = histogram.data_ptr<Count>() + row * kBins;
  std::fill_n(bins, kBins, Count{0});
  return bins;
}

int64_t QuotaThresholdSearch::begin(int64_t expert) const {
  return group_offsets_[static_cast<std::size_t>(expert * process_.ranks_per_process)];
}

int64_t QuotaThresholdSearch::end(int64_t expert) const {
  return group_offsets_[static_cast<std::size_t>((expert + 1) * process_.ranks_per_process)];
}

// The loops over pairs read their bounds once: they write int64 counts, which could alias the
// offsets as far as the compiler knows, so a bound in the condition is reloaded every pair.
template <typename Visit>
void QuotaThresholdSearch::for_each_undecided(int64_t expert, Visit visit) const {
  if (rounds_.empty()) {  // every pair of an open expert is undecided before the first round
    for (int64_t i = begin(expert), stop = end(expert); i < stop; ++i)
      visit(static_cast<uint32_t>(i));
    return;
  }
  const uint32_t* pair = undecided_.get() + begin(expert);
  const int64_t count = undecided_count_[static_cast<std::size_t>(expert)];
  for (int64_t j = 0; j < count; ++j) visit(pair[j]);
}

torch::Tensor QuotaThresholdSearch::local_histogram() {
  if (done()) throw std::logic_error("QuotaThresholdSearch: every threshold is known");
  if (rounds_.empty()) return histogram_;
  // Later rounds count the pairs that stayed undecided in a pass of their own: counting them
  // while narrow() sifts them (adding 0 for those that leave) was slower, the increments of one
  // bin waiting on each other. Their rows are the first round's, fewer: memory this thread has
  // just read, where a fresh tensor came from the shared allocator, under its lock, cold.
  torch::Tensor histogram = histogram_.narrow(0, 0, static_cast<int64_t>(open_.size()));
  const int shift = byte_shift();
  for (std::size_t k = 0; k < open_.size(); ++k) {
    Count* row = zeroed_row(histogram, static_cast<int64_t>(k));
    for_each_undecided(open_[k], [&](uint32_t i) { ++row[(key_[i] >> shift) & 0xFFU]; });
  }
  return histogram;
}

void QuotaThresholdSearch::narrow(const torch::Tensor& global_histogram) {
  const torch::Tensor histogram = global_histogram.to(torch::kCPU, torch::kInt32).contiguous();
  const auto rows = static_cast<int64_t>(open_.size());
  if (histogram.dim() != 2 || histogram.size(0) != rows || histogram.size(1) != kBins)
    throw std::logic_error(fmt::format(
        "QuotaThresholdSearch: a histogram of {} values for {} open experts of {} bins in round "
        "{}; the processes' histograms disagree",
        histogram.numel(), rows, kBins, rounds_.size()));
  const Count* bins = histogram.data_ptr<Count>();
  const int shift = byte_shift();
  const bool last_round = rounds_.size() + 1 == static_cast<std::size_t>(kRounds);
  std::vector<int64_t> still_open;
  for (int64_t k = 0; k < rows; ++k) {
    const int64_t expert = open_[static_cast<std::size_t>(k)];
    const auto e = static_cast<std::size_t>(expert);
    const Count* row = bins + k * kBins;
    if (rounds_.empty() && !pairs_known_) {  // a quota above the pairs keeps them all
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
      auto too_few = [&] {
        return std::logic_error(fmt::format(
            "QuotaThresholdSearch: expert {} has fewer pairs in round {} than it still needs; "
            "the processes' histograms disagree",
            e, rounds_.size()));
      };
      // Whole blocks of bins first, each summed apart (which vectorises), while the need runs
      // past them; then bin by bin in the block where it runs out. The walk bin by bin from the
      // top, each sum waiting on the last, was a tenth of LRMoE's plan at small batches, where
      // the bins cost what the pairs do not.
      static_assert(kBins % kScanBlock == 0, "the scan's blocks tile the bins");
      for (; bin >= 0; bin -= kScanBlock) {
        int64_t block = 0;
        for (int64_t b = bin - kScanBlock + 1; b <= bin; ++b) block += row[b];
        if (before + block >= need_[e]) break;
        before += block;
      }
      if (bin < 0) throw too_few();
      while (before + row[bin] < need_[e]) {  // within the block, unless a count is negative
        before += row[bin];
        if (--bin < 0) throw too_few();
      }
    }
    above_[e] += before;
    need_[e] -= before;
    // The bin is kept whole (the need is all of it) or not at all: its lower bytes decide
    // nothing, and its pairs are "at" the threshold, of which the need is kept.
    const bool open = need_[e] > 0 && need_[e] < row[bin] && !last_round;
    if (open) still_open.push_back(expert);
    // The threshold's bytes so far: a pair above or below them is decided for good, by its key's
    // bytes as settled; one at them stays undecided while its expert is open, and is at the
    // threshold once it closes. The ones still undecided are written over the list as it is read.
    const auto threshold = static_cast<uint32_t>(bin);
    prefix_[e] = (rounds_.empty() ? 0 : prefix_[e] << 8) | threshold;
    prefix_shift_[e] = shift;
    if (!open) continue;
    uint32_t* kept_undecided = undecided_.get() + begin(expert);
    int64_t still_undecided = 0;
    for_each_undecided(expert, [&](uint32_t i) {
      kept_undecided[still_undecided] = i;
      still_undecided += ((key_[i] >> shift) & 0xFFU) == threshold ? 1 : 0;
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

torch::Tensor QuotaThresholdSearch::local_groups() {
  if (!done()) throw std::logic_error("QuotaThresholdSearch: rounds remain");
  const int64_t ranks = process_.processes * process_.ranks_per_process;
  // Zeroed in place: LibTorch's fill, through its tensor iterator, cost more than the counting in
  // profiles.
  torch::Tensor groups = torch::empty({2, ranks, num_experts_}, torch::kInt64);
  int64_t* above = groups.data_ptr<int64_t>();
  std::fill_n(above, groups.numel(), int64_t{0});
  int64_t* at = above + ranks * num_experts_;
  // The pass that counts the pairs also lays out the candidates, so that kept() need not read
  // every key again: written in place, counted without a branch on the side, which the scores
  // make random.
  candidates_ = torch::empty({group_offsets_.back()}, torch::kInt64);
  int64_t* into = candidates_.data_ptr<int64_t>();
  int64_t count = 0;
  candidate_offsets_.assign(1, 0);
  local_at_.assign(quota_.size(), 0);
  for (int64_t e = 0; e < num_experts_; ++e) {
    const auto x = static_cast<std::size_t>(e);
    for (int64_t r = 0; r < process_.ranks_per_process && decided_[x] != Decided::None; ++r) {
      const auto g = static_cast<std::size_t>(e * process_.ranks_per_process + r);
      const int64_t slot = (process_.first_rank() + r) * num_experts_ + e;
      const int64_t first = group_offsets_[g], stop = group_offsets_[g + 1];
      if (decided_[x] == Decided::All) {
        above[slot] = stop - first;
        std::iota(into + count, into + count + stop - first, first);
        count += stop - first;
        continue;
      }
      const uint32_t prefix = prefix_[x];
      const int shift = prefix_shift_[x];
      int64_t over = 0, equal = 0;
      for (int64_t i = first; i < stop; ++i) {
        const uint32_t settled = key_[static_cast<std::size_t>(i)] >> shift;
        over += settled > prefix ? 1 : 0;
        equal += settled == prefix ? 1 : 0;
        into[count] = i;
        count += settled >= prefix ? 1 : 0;
      }
      above[slot] = over;
      at[slot] = equal;
      local_at_[x] += equal;
    }
    candidate_offsets_.push_back(count);
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

torch::Tensor QuotaThresholdSearch::kept(const torch::Tensor& summed_groups) {
  if (!candidates_.defined())
    throw std::logic_error("QuotaThresholdSearch: kept() comes once, after local_groups()");
  const torch::Tensor groups = summed_groups.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t* at = groups.data_ptr<int64_t>() + groups.size(1) * num_experts_;
  // The candidates, each expert's kept ones moved down over those left out: in place.
  int64_t* pair = candidates_.data_ptr<int64_t>();
  int64_t count = 0;
  for (int64_t e = 0; e < num_experts_; ++e) {
    const auto x = static_cast<std::size_t>(e);
    const int64_t first = candidate_offsets_[x], stop = candidate_offsets_[x + 1];
    if (decided_[x] == Decided::ByKey) {
      // The expert's ties at home ranks before this process's are kept first; of this process's,
      // the first `kept_ties` in pair order.
      int64_t tie_rank = 0;
      for (int64_t r = 0; r < process_.first_rank(); ++r) tie_rank += at[r * num_experts_ + e];
      const int64_t kept_ties = std::clamp(need_[x] - tie_rank, int64_t{0}, local_at_[x]);
      if (kept_ties < local_at_[x]) {
        const uint32_t prefix = prefix_[x];
        const int shift = prefix_shift_[x];
        int64_t ties = 0;
        for (int64_t k = first; k < stop; ++k) {
          const int64_t i = pair[k];
          const bool tie = key_[static_cast<std::size_t>(i)] >> shift == prefix;
          const bool keep = !tie || ties < kept_ties;
          ties += tie ? 1 : 0;
          pair[count] = i;
          count += keep ? 1 : 0;
        }
        continue;
      }
    }
    // Every candidate kept: above the threshold, or at it and all its ties here kept.
    if (count != first) std::copy(pair + first, pair + stop, pair + count);
    count += stop - first;
  }
  torch::Tensor kept = candidates_.narrow(0, 0, count);
  candidates_ = torch::Tensor();
  return kept;
}

KeptOverProcesses kept_over_processes(Collectives& collectives, std::vector<int64_t> group_offsets,
                                      const torch::Tensor& scores, std::vector<int64_t> quota,
                                      const std::vector<int64_t>& pairs,
                                      const ProcessView& process) {
  QuotaThresholdSearch search(std::move(group_offsets), process, scores, std::move(quota), pairs);
  while (!search.done()) {
    torch::Tensor histogram = search.local_histogram();
    collectives.sum(histogram);
    search.narrow(histogram);
  }
  // Every home rank's pairs above and at the threshold: the kept groups, and the ties of the
  // processes before this one, in one all-reduce.
  torch::Tensor groups = search.local_groups();
  collectives.sum(groups);
  return {search.kept(groups).to(scores.device()), search.kept_groups(groups), search.rounds()};
}

}  // namespace lrmoe
