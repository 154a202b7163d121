#include "core/pipeline/plan_collectives.hpp"

#include <algorithm>
#include <utility>

#include "core/pipeline/quota_threshold_search.hpp"

namespace lrmoe {
namespace {

// Bytes the exact plan gathers per pair: expert, home rank and gate as three float64
// (core/pipeline/global_pairs.cpp), and four float32 signals per computed pair. What it holds
// per pair of the whole batch: that gathered triple, then expert, home, source row, pair id
// (int64) and gate (float32), and per computed pair its signals gathered and split (2 x 16), its
// pair id and its layout's order and instance (3 x 8). Sort buffers are not counted.
constexpr double kPairGatherBytes = 24;
constexpr double kSignalGatherBytes = 16;
constexpr double kPairHeldBytes = kPairGatherBytes + 36;
constexpr double kComputedHeldBytes = 2 * kSignalGatherBytes + 24;
constexpr double kCountBytes = 8;  // every count is int64 but a histogram's bins
constexpr double kBinBytes = sizeof(QuotaThresholdSearch::Count);

// The plan's collectives of one pass, as each rank takes part in them.
class PlanTally {
 public:
  PlanTally(const CostModel& model, int64_t ranks)
      : model_(model), ranks_(ranks), received_(static_cast<std::size_t>(ranks), 0.0) {}

  // Every rank contributes and receives the sum of `bytes`: a ring moves 2 (R - 1) / R of it.
  void all_reduce(double bytes) {
    result_.seconds += model_.all_reduce_seconds(bytes, ranks_);
    const double ring = 2.0 * static_cast<double>(ranks_ - 1) / static_cast<double>(ranks_);
    for (double& received : received_) received += ring * bytes;
  }
  // Rank r contributes `contribution[r]` bytes and receives everyone else's.
  void all_gather(const std::vector<double>& contribution) {
    result_.seconds += model_.all_gather_seconds(contribution);
    double total = 0;
    for (const double bytes : contribution) total += bytes;
    for (std::size_t r = 0; r < received_.size(); ++r) received_[r] += total - contribution[r];
  }
  // One all-to-all-v call of several messages, each (`pairs` [ranks * ranks] rows from rank s
  // to rank d, `row_bytes` each).
  void all_to_all(const std::vector<std::pair<const std::vector<int64_t>*, double>>& messages) {
    TrafficMatrix traffic(ranks_);
    for (const auto& [pairs, row_bytes] : messages) {
      const TrafficMatrix message = TrafficMatrix::of_rows(*pairs, ranks_, row_bytes);
      for (std::size_t i = 0; i < traffic.bytes.size(); ++i) traffic.bytes[i] += message.bytes[i];
    }
    for (int64_t s = 0; s < ranks_; ++s)
      for (int64_t d = 0; d < ranks_; ++d)
        received_[static_cast<std::size_t>(d)] += traffic.at(s, d);
    result_.seconds += model_.exchange_seconds(traffic);
  }
  void hold(double bytes) { result_.bytes_held += bytes; }

  PlanCollectives result() const {
    PlanCollectives out = result_;
    out.bytes_received = *std::max_element(received_.begin(), received_.end());
    return out;
  }

 private:
  const CostModel& model_;
  int64_t ranks_;
  std::vector<double> received_;  // [ranks]
  PlanCollectives result_;
};

double sum(const std::vector<int64_t>& values) {
  double total = 0;
  for (const int64_t value : values) total += static_cast<double>(value);
  return total;
}

void exact_plan(const PipelineSettings& settings, const ForwardPass& forward, PlanTally& plan) {
  std::vector<double> pair_bytes, signal_bytes;
  const std::vector<int64_t> computed_home = forward.layout.sent_by_rank();
  for (std::size_t r = 0; r < static_cast<std::size_t>(settings.ranks); ++r) {
    pair_bytes.push_back(static_cast<double>(forward.routed_per_home_rank[r]) * kPairGatherBytes);
    signal_bytes.push_back(static_cast<double>(computed_home[r]) * kSignalGatherBytes);
  }
  plan.all_gather(pair_bytes);
  plan.all_gather(signal_bytes);
  plan.hold(sum(forward.routed_per_home_rank) * kPairHeldBytes +
            sum(computed_home) * kComputedHeldBytes);
}

void scalable_plan(const PipelineSettings& settings, const ForwardPass& forward,
                   const BackwardPass& backward, PlanTally& plan) {
  const auto R = static_cast<double>(settings.ranks);
  const auto E = static_cast<double>(settings.num_experts);
  const auto I = static_cast<double>(forward.table->size());
  const double groups = R * E * kCountBytes;  // pairs per (home rank, expert)
  const double rank_pairs = R * R * kCountBytes;
  // A threshold search: a histogram round per byte, of the experts still open in it, then every
  // home rank's pairs above and at the threshold per expert (which are the kept groups).
  auto search = [&](const std::vector<int64_t>& rounds) {
    double largest = 2 * groups;
    for (const int64_t open : rounds) {
      const double histogram = static_cast<double>(open) * QuotaThresholdSearch::kBins * kBinBytes;
      plan.all_reduce(histogram);
      largest = std::max(largest, histogram);
    }
    plan.all_reduce(2 * groups);
    return largest;
  };
  double searched = 0;
  plan.all_reduce(groups);  // routed
  if (forward.search_rounds) searched = search(*forward.search_rounds);
  if (backward.search_rounds) searched = std::max(searched, search(*backward.search_rounds));
  // Quotas spread by score mass (Note [Quotas by score mass]): the largest score, then the mass
  // of each expert.
  if (!forward.quota_pool.empty()) {
    plan.all_reduce(kCountBytes);
    plan.all_reduce(E * kCountBytes);
  }
  // Routed and computed groups, the forward and backward routed counts and rank matrices, the
  // kept groups, and what one search holds at a time.
  plan.hold(groups * (forward.search_rounds ? 3 : 2) + 2 * R * I * kCountBytes + 2 * rank_pairs +
            searched);
  if (settings.recompute || backward.context_in_place) return;
  // Kept pairs per (home rank, forward rank) and per (forward rank, backward rank) in one
  // all-reduce, the second per (forward rank, backward instance) when chunked (Note [Chunked
  // exchange]); then, in one call, each kept pair's two destination rows to its forward rank and
  // its forward rank along to its backward rank (core/pipeline/context_move.cpp).
  const double moved =
      rank_pairs + (forward.instance_chunk.empty() ? rank_pairs : R * I * kCountBytes);
  plan.all_reduce(moved);
  plan.all_to_all(
      {{&backward.home_forward, 2 * kCountBytes}, {&backward.layout.matrix, kCountBytes}});
  plan.hold(moved);
}

}  // namespace

PlanCollectives plan_collectives(const PipelineSettings& settings, const ForwardPass& forward,
                                 const BackwardPass& backward) {
  PlanTally plan(settings.cost_model, settings.ranks);
  if (settings.planning == Planning::Scalable) {
    scalable_plan(settings, forward, backward, plan);
  } else {
    exact_plan(settings, forward, plan);
  }
  return plan.result();
}

}  // namespace lrmoe
