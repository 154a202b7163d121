#pragma once
// How a logical rank's own work is timed (Note [Critical path] in docs/notes.md). The expert
// computation of a pass runs rank by rank, each rank's part through a RankClock into that rank's
// SpanTimer, so that the time of every rank is known even when one process hosts several; the
// critical path of a layer is built from those times (core/pipeline/critical_path.hpp).

#include <torch/torch.h>

#include <cstdint>
#include <functional>

#include "core/device/span_timer.hpp"

namespace lrmoe {

class RankClock {
 public:
  virtual ~RankClock() = default;
  // Runs `work`, one rank's part of a phase over `rows` pair rows issued to `device`, and
  // charges its time to `timer`.
  virtual void time(int64_t rows, const torch::Device& device, SpanTimer& timer,
                    const std::function<void()>& work) = 0;
};

// What the work took on its device (Note [Device timing]).
class DeviceRankClock : public RankClock {
 public:
  void time(int64_t, const torch::Device& device, SpanTimer& timer,
            const std::function<void()>& work) override {
    timer.start(device);
    work();
    timer.stop();
  }
};

}  // namespace lrmoe
