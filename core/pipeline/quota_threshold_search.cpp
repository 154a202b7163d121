#include "core/pipeline/quota_threshold_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
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
                                           const torch::Tensor& scores, std::vector<int64_t> quota)
    : quota_(std::move(quota)) {
  const auto num_experts = static_cast<int64_t>(quota_.size());
  const torch::Tensor e = experts.to(torch::kCPU, torch::kInt64).contiguous();
  const torch::Tensor s = scores.to(torch::kCPU, torch::kFloat32).contiguous();
  if (e.numel() != s.numel())
    throw std::invalid_argument(
        fmt::format("QuotaThresholdSearch: {} experts but {} scores", e.numel(), s.numel()));
  expert_.assign(e.data_ptr<int64_t>(), e.data_ptr<int64_t>() + e.numel());
  key_.reserve(expert_.size());
  for (int64_t i = 0; i < s.numel(); ++i) key_.push_back(score_key(s.data_ptr<float>()[i]));
  for (int64_t x : expert_) {
    if (x < 0 || x >= num_experts)
      throw std::invalid_argument(
          fmt::format("QuotaThresholdSearch: expert {} outside [0, {})", x, num_experts));
  }
  prefix_.assign(quota_.size(), 0);
  above_.assign(quota_.size(), 0);
  need_ = quota_;
}

torch::Tensor QuotaThresholdSearch::local_histogram() const {
  if (round_ >= kRounds) throw std::logic_error("QuotaThresholdSearch: every round is done");
  const auto num_experts = static_cast<int64_t>(quota_.size());
  auto histogram = torch::zeros({num_experts, kBins}, torch::kInt64);
  int64_t* bins = histogram.data_ptr<int64_t>();
  const int settled = 8 * round_;  // the key's high bits already settled
  const int shift = 24 - settled;
  for (std::size_t i = 0; i < key_.size(); ++i) {
    const auto e = static_cast<std::size_t>(expert_[i]);
    // The shift by 32 that round 0 would ask for is undefined: every pair matches then.
    if (settled > 0 && (key_[i] >> (32 - settled)) != prefix_[e]) continue;
    ++bins[expert_[i] * kBins + ((key_[i] >> shift) & 0xFFU)];
  }
  return histogram;
}

void QuotaThresholdSearch::narrow(const torch::Tensor& global_histogram) {
  const torch::Tensor histogram = global_histogram.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t* bins = histogram.data_ptr<int64_t>();
  for (std::size_t e = 0; e < quota_.size(); ++e) {
    const int64_t* row = bins + static_cast<int64_t>(e) * kBins;
    int64_t matching = 0;
    for (int64_t b = 0; b < kBins; ++b) matching += row[b];
    if (round_ == 0 && need_[e] > matching) need_[e] = matching;  // a quota above the pairs
    // From the highest bin down, the bin where the need runs out holds the threshold. With
    // nothing needed it stays at bin 255: after four rounds the key 0xFFFFFFFF, a NaN's, above
    // every finite score's, so that no pair is kept.
    int64_t bin = kBins - 1;
    int64_t before = 0;
    if (need_[e] > 0) {
      while (before + row[bin] < need_[e]) {
        before += row[bin];
        if (--bin < 0)
          throw std::logic_error(fmt::format(
              "QuotaThresholdSearch: expert {} has fewer pairs in round {} than it still needs; "
              "the processes' histograms disagree",
              e, round_));
      }
    }
    above_[e] += before;
    need_[e] -= before;
    prefix_[e] = (prefix_[e] << 8) | static_cast<uint32_t>(bin);
  }
  ++round_;
}

torch::Tensor QuotaThresholdSearch::local_groups(const torch::Tensor& home, int64_t ranks) const {
  if (round_ < kRounds) throw std::logic_error("QuotaThresholdSearch: rounds remain");
  const torch::Tensor h = home.to(torch::kCPU, torch::kInt64).contiguous();
  if (h.numel() != static_cast<int64_t>(key_.size()))
    throw std::invalid_argument(
        fmt::format("QuotaThresholdSearch: {} home ranks for {} pairs", h.numel(), key_.size()));
  const auto num_experts = static_cast<int64_t>(quota_.size());
  auto groups = torch::zeros({2, ranks, num_experts}, torch::kInt64);
  int64_t* count = groups.data_ptr<int64_t>();
  const int64_t* rank = h.data_ptr<int64_t>();
  for (std::size_t i = 0; i < key_.size(); ++i) {
    const uint32_t threshold = prefix_[static_cast<std::size_t>(expert_[i])];
    if (key_[i] < threshold) continue;
    const int64_t at = key_[i] == threshold ? 1 : 0;
    ++count[(at * ranks + rank[i]) * num_experts + expert_[i]];
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
  if (round_ < kRounds) throw std::logic_error("QuotaThresholdSearch: rounds remain");
  // Each expert's ties at home ranks before this process's: kept first.
  const torch::Tensor at = summed_groups.to(torch::kCPU, torch::kInt64)[1];
  const torch::Tensor before = at.narrow(0, 0, first_rank).sum(0).contiguous();
  std::vector<int64_t> tie_rank(before.data_ptr<int64_t>(),
                                before.data_ptr<int64_t>() + before.numel());
  auto kept = torch::zeros({static_cast<int64_t>(key_.size())}, torch::kBool);
  bool* keep = kept.data_ptr<bool>();
  for (std::size_t i = 0; i < key_.size(); ++i) {
    const auto e = static_cast<std::size_t>(expert_[i]);
    if (key_[i] > prefix_[e]) {
      keep[i] = true;
    } else if (key_[i] == prefix_[e]) {
      keep[i] = tie_rank[e]++ < need_[e];
    }
  }
  return kept;
}

KeptOverProcesses kept_over_processes(Collectives& collectives, const torch::Tensor& experts,
                                      const torch::Tensor& home, const torch::Tensor& scores,
                                      std::vector<int64_t> quota, int64_t ranks,
                                      const ProcessView& process) {
  QuotaThresholdSearch search(experts, scores, std::move(quota));
  while (search.rounds_done() < QuotaThresholdSearch::kRounds) {
    torch::Tensor histogram = search.local_histogram();
    collectives.sum(histogram);
    search.narrow(histogram);
  }
  // Every home rank's pairs above and at the threshold: the kept groups, and the ties of the
  // processes before this one, in one all-reduce.
  torch::Tensor groups = search.local_groups(home, ranks);
  collectives.sum(groups);
  return {search.kept(groups, process.first_rank()).nonzero().flatten().to(experts.device()),
          search.kept_groups(groups)};
}

}  // namespace lrmoe
