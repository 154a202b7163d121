#pragma once
// Counter-based randomness for the data sources. Every random draw is derived from
// (experiment seed, stream, a, b, row) by hashing, never from a generator that advances across
// calls, so a batch is a pure function of its coordinates: any step can be regenerated alone, in
// any order, from any thread, and on any platform (no std:: distributions, whose results differ
// between standard libraries).

#include <cstdint>

#include "lrmoe/counter_random.hpp"  // mix64

namespace lrmoe {

// The independent random streams of one seed. Training and evaluation draw from different
// streams so their sequences never coincide; the synthetic source's structure has its own.
enum class SeedStream : uint64_t { Train = 0, Validation = 1, Structure = 2 };

// The seed of one sequence (or one structural object): training uses (step, micro, row),
// evaluation (index, 0, row), the synthetic structure (topic, 0, 0).
constexpr uint64_t stream_seed(uint64_t seed, SeedStream stream, uint64_t a, uint64_t b,
                               uint64_t row) {
  constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
  uint64_t state = mix64(seed + kGolden);
  for (uint64_t coordinate : {static_cast<uint64_t>(stream), a, b, row}) {
    // Mixing the coordinate before combining keeps small coordinates (0, 1, 2...) from
    // cancelling against each other.
    state = mix64(state ^ mix64(coordinate + kGolden));
  }
  return state;
}

// A small, fast generator for drawing many values from one derived seed: splitmix64 over a
// counter.
class SplitMix64 {
 public:
  explicit constexpr SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix64(state_);
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform in [0, n) for n >= 1; the bias for n far below 2^53 is negligible.
  int64_t below(int64_t n) {
    const auto index = static_cast<int64_t>(uniform() * static_cast<double>(n));
    return index < n ? index : n - 1;
  }

 private:
  uint64_t state_;
};

}  // namespace lrmoe
