#include "core/replay/expert_loads.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "core/data/seeded_rng.hpp"

namespace lrmoe {
namespace {

// Mixed into the seed so that the experts' order is not correlated with the data's draws.
constexpr uint64_t kExpertOrderStream = 0x65787065727473ULL;  // "experts"

std::vector<double> normalized(std::vector<double> values) {
  const double total = std::accumulate(values.begin(), values.end(), 0.0);
  for (double& v : values) v /= total;
  return values;
}

}  // namespace

SkewedLoads::SkewedLoads(double exponent, int64_t experts, uint64_t seed)
    : exponent_(exponent), experts_(experts), seed_(seed) {
  if (!std::isfinite(exponent) || exponent < 0) {
    throw std::invalid_argument(fmt::format(
        "zipf exponent {}: expected a number >= 0 (0 is balanced routing; 1 to 1.5 is the skew "
        "of trained routers without a balance loss)",
        exponent));
  }
}

std::vector<double> SkewedLoads::shares(int64_t /*step*/, int64_t moe_layer) const {
  std::vector<int64_t> order(static_cast<std::size_t>(experts_));
  std::iota(order.begin(), order.end(), int64_t{0});
  SplitMix64 random(mix64(seed_ ^ mix64(kExpertOrderStream + static_cast<uint64_t>(moe_layer))));
  for (int64_t i = experts_ - 1; i > 0; --i)
    std::swap(order[static_cast<std::size_t>(i)],
              order[static_cast<std::size_t>(random.below(i + 1))]);
  std::vector<double> shares(static_cast<std::size_t>(experts_));
  for (int64_t position = 0; position < experts_; ++position) {
    shares[static_cast<std::size_t>(order[static_cast<std::size_t>(position)])] =
        std::pow(1.0 + static_cast<double>(position), -exponent_);
  }
  return normalized(std::move(shares));
}

std::string SkewedLoads::describe() const {
  return fmt::format("synthetic skew: zipf exponent {} over {} experts, expert order seed {}",
                     exponent_, experts_, seed_);
}

RecordedLoads::RecordedLoads(RecordedExpertLoads recorded, int64_t experts, int64_t moe_layers)
    : recorded_(std::move(recorded)), experts_(experts), moe_layers_(moe_layers) {
  if (recorded_.pairs.empty())
    throw std::invalid_argument(recorded_.origin + " recorded no per-expert loads");
  for (std::size_t s = 0; s < recorded_.pairs.size(); ++s) {
    const auto& layers = recorded_.pairs[s];
    if (layers.empty())
      throw std::invalid_argument(
          fmt::format("{}: step {} has no MoE layer loads", recorded_.origin, recorded_.steps[s]));
    for (std::size_t l = 0; l < layers.size(); ++l) {
      if (std::accumulate(layers[l].begin(), layers[l].end(), int64_t{0}) <= 0)
        throw std::invalid_argument(fmt::format("{}: step {}, MoE layer {} routed no pairs",
                                                recorded_.origin, recorded_.steps[s], l));
    }
  }
}

std::vector<double> RecordedLoads::shares(int64_t step, int64_t moe_layer) const {
  const auto& layers = recorded_.pairs[static_cast<std::size_t>(
      (step - 1) % static_cast<int64_t>(recorded_.pairs.size()))];
  const auto source_layers = static_cast<int64_t>(layers.size());
  const auto source = static_cast<std::size_t>(moe_layer * source_layers / moe_layers_);
  return rescale_shares(layers[source], experts_);
}

std::string RecordedLoads::describe() const {
  return fmt::format("recorded loads: {}, steps {}..{}, rescaled to {} experts", recorded_.origin,
                     recorded_.steps.front(), recorded_.steps.back(), experts_);
}

std::vector<double> rescale_shares(const std::vector<int64_t>& source_pairs,
                                   int64_t target_experts) {
  const auto S = static_cast<int64_t>(source_pairs.size());
  const int64_t T = target_experts;
  const auto total =
      static_cast<double>(std::accumulate(source_pairs.begin(), source_pairs.end(), int64_t{0}));
  // In units of 1 / (S * T): source i spans [i * T, (i + 1) * T), target j [j * S, (j + 1) * S).
  std::vector<double> shares(static_cast<std::size_t>(T), 0.0);
  for (int64_t j = 0; j < T; ++j) {
    const int64_t begin = j * S, end = (j + 1) * S;
    for (int64_t i = begin / T; i < S && i * T < end; ++i) {
      const int64_t overlap = std::min(end, (i + 1) * T) - std::max(begin, i * T);
      if (overlap <= 0) continue;
      shares[static_cast<std::size_t>(j)] +=
          static_cast<double>(source_pairs[static_cast<std::size_t>(i)]) / total *
          static_cast<double>(overlap) / static_cast<double>(T);
    }
  }
  return shares;
}

std::vector<int64_t> expert_counts_from_shares(const std::vector<double>& shares, int64_t tokens,
                                               int64_t top_k) {
  const std::size_t E = shares.size();
  std::vector<bool> capped(E, false);
  std::vector<double> ideal(E, 0.0);
  // Cap the experts whose share exceeds one pair per token, then spread the rest again.
  for (bool changed = true; changed;) {
    changed = false;
    double free_share = 0;
    int64_t free_experts = 0, capped_pairs = 0;
    for (std::size_t e = 0; e < E; ++e) {
      if (capped[e]) {
        capped_pairs += tokens;
      } else {
        free_share += shares[e];
        ++free_experts;
      }
    }
    const auto remaining = static_cast<double>(tokens * top_k - capped_pairs);
    for (std::size_t e = 0; e < E; ++e) {
      if (capped[e]) {
        ideal[e] = static_cast<double>(tokens);
        continue;
      }
      ideal[e] = free_share > 0 ? remaining * shares[e] / free_share
                                : remaining / static_cast<double>(free_experts);
      if (ideal[e] > static_cast<double>(tokens)) {
        capped[e] = true;
        changed = true;
      }
    }
  }
  std::vector<int64_t> counts(E);
  std::vector<std::pair<double, std::size_t>> remainders;
  int64_t assigned = 0;
  for (std::size_t e = 0; e < E; ++e) {
    counts[e] = static_cast<int64_t>(std::floor(ideal[e]));
    assigned += counts[e];
    remainders.emplace_back(ideal[e] - static_cast<double>(counts[e]), e);
  }
  // Largest remainders first; equal ones to the lower expert.
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; assigned < tokens * top_k && i < E; ++i, ++assigned)
    ++counts[remainders[i].second];
  return counts;
}

}  // namespace lrmoe
