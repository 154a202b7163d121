#pragma once
// Time of the planning's parts, lap by lap (PipelineOverhead), on one of two clocks.

#include <chrono>

#include "core/system/thread_cpu_clock.hpp"

namespace lrmoe {

// What the plan's parts are timed by. Training times them by the wall clock: what the step
// waits for. A replay of several processes as threads sharing this machine's cores (`lrmoe
// replay --processes`, Note [Replay] in docs/notes.md) times them by the CPU time of the thread
// that plans, less its time inside collectives (thread_work_cpu_seconds): what that process
// would spend on a core of its own. The collectives are the cost model's to charge.
enum class PlanClock { Wall, ThreadCpu };

class Stopwatch {
 public:
  explicit Stopwatch(PlanClock clock = PlanClock::Wall) : clock_(clock), last_(now()) {}

  double lap() {
    const double at = now();
    const double seconds = at - last_;
    last_ = at;
    return seconds;
  }

 private:
  double now() const {
    if (clock_ == PlanClock::ThreadCpu) return thread_work_cpu_seconds();
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  PlanClock clock_;
  double last_;
};

}  // namespace lrmoe
