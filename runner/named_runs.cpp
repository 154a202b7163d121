#include "runner/named_runs.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace lrmoe {

std::vector<int64_t> named_runs(const ResultsStore& store, std::vector<int64_t> runs,
                                const std::optional<std::string>& sweep,
                                const std::string& command) {
  if (sweep) {
    const std::vector<int64_t> last = store.sweep_last_runs(*sweep);
    runs.insert(runs.end(), last.begin(), last.end());
  }
  if (runs.empty()) {
    throw std::invalid_argument(fmt::format(
        "{0}: nothing to {0}; name a sweep (--sweep NAME) or runs (lrmoe {0} 3 4 5)", command));
  }
  return runs;
}

}  // namespace lrmoe
