#pragma once
// Training progress for a person: on a terminal one live line (step, loss, eval loss, tokens/s,
// ETA) rewritten in place; otherwise (logs, CI) a plain line every log_every steps and at every
// evaluation.

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
