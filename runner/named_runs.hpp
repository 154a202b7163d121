#pragma once
// The runs a command is given: run ids and a sweep's name, as `lrmoe compare` and `lrmoe project`
// take them.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/results_store.hpp"

namespace lrmoe {

// `runs`, then the last run of each of `sweep`'s cells. Throws std::invalid_argument naming
// `command` ("compare") when that is none; StoreError for an unknown sweep.
std::vector<int64_t> named_runs(const ResultsStore& store, std::vector<int64_t> runs,
                                const std::optional<std::string>& sweep,
                                const std::string& command);

}  // namespace lrmoe
