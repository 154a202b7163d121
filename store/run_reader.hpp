#pragma once
// Reading runs and their steps back (list_runs, find_run, steps).

#include <cstdint>
#include <optional>
#include <vector>

#include "store/results_store.hpp"
#include "store/sqlite_handle.hpp"

namespace lrmoe::store {

// Every run in id order, or only `run` when given. Needs the run_summary view (schema 2).
std::vector<RunSummary> read_run_summaries(const sqlite::Database& db,
                                           std::optional<int64_t> run = std::nullopt);

// A run's steps in step order.
std::vector<StepRecord> read_steps(const sqlite::Database& db, int64_t run);

}  // namespace lrmoe::store
