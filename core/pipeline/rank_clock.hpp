#pragma once
// How a logical rank's own work is timed (Note [Critical path] in docs/notes.md). The expert
// computation of a pass runs rank by rank, each rank's part through a RankClock, so that the
// time of every rank is known even when one process hosts several; the critical path of a layer
// is built from those times (core/pipeline/critical_path.hpp).

#include <chrono>
#include <cstdint>
#include <functional>

namespace lrmoe {

class RankClock {
 public:
  virtual ~RankClock() = default;
  // Runs `work`, one rank's part of a phase over `rows` pair rows, and returns the seconds it
  // is charged.
  virtual double time(int64_t rows, const std::function<void()>& work) = 0;
};

// The wall clock: what the work took.
class WallRankClock : public RankClock {
 public:
  double time(int64_t, const std::function<void()>& work) override {
    const auto started = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
};

}  // namespace lrmoe
