#include "core/data/markov_chain.hpp"

#include <cmath>

namespace lrmoe {

std::vector<double> stationary_distribution(const MarkovChain& chain) {
  // Power iteration on the lazy chain (P + I) / 2: it has the same stationary distribution as P
  // but is aperiodic even when P is not (a pure cycle), so the iteration always converges.
  const auto states = static_cast<size_t>(chain.states);
  std::vector<double> current(states, 1.0 / static_cast<double>(states));
  std::vector<double> next(states);
  constexpr int kMaxIterations = 200000;
  constexpr double kTolerance = 1e-14;
  for (int iteration = 0; iteration < kMaxIterations; ++iteration) {
    for (size_t s = 0; s < states; ++s) next[s] = 0.5 * current[s];
    for (int64_t s = 0; s < chain.states; ++s) {
      const double half_mass = 0.5 * current[static_cast<size_t>(s)];
      for (int64_t slot = 0; slot < chain.branching; ++slot) {
        next[static_cast<size_t>(chain.successor(s, slot))] +=
            half_mass * chain.probability(s, slot);
      }
    }
    double change = 0.0;
    double total = 0.0;
    for (size_t s = 0; s < states; ++s) {
      change += std::abs(next[s] - current[s]);
      total += next[s];
    }
    // Renormalising each round stops rounding errors from accumulating in the total mass.
    for (size_t s = 0; s < states; ++s) current[s] = next[s] / total;
    if (change < kTolerance) break;
  }
  return current;
}

double entropy_rate(const MarkovChain& chain, const std::vector<double>& stationary) {
  double rate = 0.0;
  for (int64_t s = 0; s < chain.states; ++s) {
    double row_entropy = 0.0;
    for (int64_t slot = 0; slot < chain.branching; ++slot) {
      const double p = chain.probability(s, slot);
      if (p > 0.0) row_entropy -= p * std::log(p);
    }
    rate += stationary[static_cast<size_t>(s)] * row_entropy;
  }
  return rate;
}

std::vector<double> cumulative(const double* weights, int64_t count) {
  std::vector<double> sums(static_cast<size_t>(count));
  double running = 0.0;
  for (int64_t i = 0; i < count; ++i) {
    running += weights[i];
    sums[static_cast<size_t>(i)] = running;
  }
  // Rounding may leave the total a hair below one, where a draw of u = 0.9999999 would fall
  // off the end.
  if (count > 0) sums.back() = 1.0;
  return sums;
}

}  // namespace lrmoe
