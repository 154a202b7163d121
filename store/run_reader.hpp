#pragma once
// Reading runs and their steps back (list_runs, find_run, steps).

#include <cstdint>
#include <optional>
#include <vector>

#include "store/results_store.hpp"
#include "store/sqlite_handle.hpp"

namespace lrmoe::store {

// Every run in id order, or only `run` when given. Needs the current schema.
std::vector<RunSummary> read_run_summaries(const sqlite::Database& db,
                                           std::optional<int64_t> run = std::nullopt);

// A run's steps in step order, from a file of any schema version (`schema_version`, the
// file's): steps of files older than schema 3 read moe_modeled_seconds as NaN.
std::vector<StepRecord> read_steps(const sqlite::Database& db, int64_t run, int schema_version);

}  // namespace lrmoe::store
