#pragma once
// A sparse Markov chain with a fixed number of successors per state, and the two quantities the
// synthetic source needs from it: the stationary distribution and the entropy rate.

#include <cstdint>
#include <vector>

namespace lrmoe {

struct MarkovChain {
  int64_t states = 0;
  int64_t branching = 0;              // successors of every state
  std::vector<int32_t> successors;    // [states * branching]: successor states of each state
  std::vector<double> probabilities;  // [states * branching]: each state's row sums to one

  // Probability mass of successor `slot` of `state`.
  double probability(int64_t state, int64_t slot) const {
    return probabilities[static_cast<size_t>(state * branching + slot)];
  }
  int32_t successor(int64_t state, int64_t slot) const {
    return successors[static_cast<size_t>(state * branching + slot)];
  }
};

// The distribution pi with pi P = pi, for an irreducible chain. Sums to one.
std::vector<double> stationary_distribution(const MarkovChain& chain);

// sum_s pi(s) H(P(s, .)) in nats: the expected surprise of the next state given the current one
// once the chain is stationary.
double entropy_rate(const MarkovChain& chain, const std::vector<double>& stationary);

// Running sums of `weights`, with the last forced to exactly one, so that the first index whose
// sum exceeds a uniform u in [0, 1) is a draw from `weights` (assumed normalised).
std::vector<double> cumulative(const double* weights, int64_t count);

}  // namespace lrmoe
