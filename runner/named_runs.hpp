#pragma once
// The runs a command is given: run ids and a sweep's name, as `lrmoe compare` and `lrmoe project`
// take them.

#include <cstdint>
#include <string>
#include <vector>

#include "store/results_store.hpp"

namespace lrmoe {

// `runs`, then the last run of each cell of each of `sweeps`, in order, each run once. Throws
// std::invalid_argument naming `command` ("compare") when that is none; StoreError for an
// unknown sweep.
std::vector<int64_t> named_runs(const ResultsStore& store, std::vector<int64_t> runs,
                                const std::vector<std::string>& sweeps, const std::string& command);

}  // namespace lrmoe
