#pragma once
// Wall time of the planning's parts, lap by lap (PipelineOverhead).

#include <chrono>

namespace lrmoe {

class Stopwatch {
 public:
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return seconds;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace lrmoe
