#include "runner/named_runs.hpp"

#include "runner/count_option.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

namespace lrmoe {

std::vector<int64_t> named_runs(const ResultsStore& store, std::vector<int64_t> runs,
                                const std::vector<std::string>& sweeps,
                                const std::string& command) {
  for (const std::string& sweep : sweeps) {
    const std::vector<int64_t> last = store.sweep_last_runs(sweep);
    runs.insert(runs.end(), last.begin(), last.end());
  }
  // A run named twice (as an id and as a sweep's cell) counts once.
  std::unordered_set<int64_t> seen;
  runs.erase(std::remove_if(runs.begin(), runs.end(),
                            [&](int64_t run) { return !seen.insert(run).second; }),
             runs.end());
  if (runs.empty()) {
    throw std::invalid_argument(fmt::format(
        "{0}: nothing to {0}; name a sweep (--sweep NAME) or runs (lrmoe {0} 3 4 5)", command));
  }
  return runs;
}

void add_named_runs_options(CLI::App* command, std::vector<int64_t>& runs,
                            std::vector<std::string>& sweeps) {
  command->add_option("runs", runs, "run ids (besides or instead of --sweep)")
      ->check(count_between(1));
  command
      ->add_option("--sweep", sweeps,
                   "a sweep's name: its cells' last runs (repeatable: several sweeps' runs "
                   "together)")
      ->allow_extra_args(false);
}

}  // namespace lrmoe
