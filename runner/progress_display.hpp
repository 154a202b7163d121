#pragma once
// Training progress for a person: a line (step, loss, eval loss, tokens/s, ETA) kept every
// log_every steps and at every evaluation, and on a terminal, below those, one live line
// rewritten in place every step.

#include <cstdint>
#include <optional>

#include "core/train/training_observer.hpp"
#include "runner/live_line.hpp"

namespace lrmoe {

class ProgressDisplay {
 public:
  ProgressDisplay(int64_t max_steps, int64_t log_every);
  void update(const StepReport& report);
  // Ends the live line so that later output starts on a fresh line.
  void finish();

 private:
  int64_t max_steps_;
  int64_t log_every_;
  LiveLine line_;
  std::optional<double> last_eval_;
};

}  // namespace lrmoe
