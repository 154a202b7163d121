#include "core/pipeline/critical_path.hpp"

#include <algorithm>

namespace lrmoe {

CriticalPath critical_path(const std::vector<double> (&expert_seconds)[kPhases],
                           const std::vector<ProcessPhaseTimes>& processes,
                           int64_t ranks_per_process) {
  CriticalPath path;
  for (int phase = 0; phase < kPhases; ++phase) {
    const std::vector<double>& expert = expert_seconds[phase];
    std::vector<double>& ranks = path.rank_seconds[phase];
    ranks.assign(expert.size(), 0.0);
    for (std::size_t p = 0; p < processes.size(); ++p) {
      const auto first = static_cast<std::size_t>(p * static_cast<std::size_t>(ranks_per_process));
      const auto last =
          std::min(expert.size(), first + static_cast<std::size_t>(ranks_per_process));
      double own = 0;
      for (std::size_t r = first; r < last; ++r) own += expert[r];
      // The rest of the process's time is token-parallel work its ranks share evenly; it cannot
      // be negative (clock granularity).
      const double shared =
          std::max(0.0, processes[p].wall[phase] - own - processes[p].planning[phase]) /
          static_cast<double>(ranks_per_process);
      for (std::size_t r = first; r < last; ++r)
        ranks[r] = expert[r] + processes[p].planning[phase] + shared;
    }
    if (!ranks.empty()) path.seconds += *std::max_element(ranks.begin(), ranks.end());
    for (double t : ranks) path.rank_sum += t;
  }
  return path;
}

}  // namespace lrmoe
