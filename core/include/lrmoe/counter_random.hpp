#pragma once
// Counter-based randomness: a draw is a pure function of (seed, counter), never of a generator
// that advances across calls, so it is the same whichever process or thread makes it and in
// whatever order. A policy that draws per pair keys its draws by PairBatch::pair_ids (Note
// [Pair order] in docs/notes.md), so that the exact and the scalable plan, and any number of
// processes, give each pair the same draw.

#include <cstdint>

namespace lrmoe {

// The splitmix64 finaliser: a bijective 64-bit mix in which every input bit affects every
// output bit, so neighbouring counters give unrelated values.
constexpr uint64_t mix64(uint64_t value) {
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

// Uniform in [0, 1) with 24 random bits: every value is an exact float32.
constexpr float uniform_at(uint64_t seed, uint64_t counter) {
  // The counter mixed before it is combined, so that seeds differing by a small counter offset
  // do not give shifted copies of one sequence.
  const uint64_t bits = mix64(seed ^ mix64(counter + 0x9e3779b97f4a7c15ULL));
  return static_cast<float>(bits >> 40) * 0x1.0p-24F;
}

}  // namespace lrmoe
