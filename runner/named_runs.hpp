#pragma once
// The runs a command is given: run ids and a sweep's name, as `lrmoe compare` and `lrmoe project`
// take them.

#include <CLI/CLI.hpp>

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

// Registers the run ids (positional) and --sweep NAME, one name per --sweep so that run ids
// after it stay run ids.
void add_named_runs_options(CLI::App* command, std::vector<int64_t>& runs,
                            std::vector<std::string>& sweeps);

}  // namespace lrmoe
