#pragma once
// What `lrmoe compare` reads of each run: its outcome (time to target, measured and modeled),
// memory peak, the pipeline's pair counts, and its sweep cell's settings if it has one.

#include <cstdint>
#include <string>
#include <vector>

#include "store/results_store.hpp"
#include "store/sqlite_handle.hpp"

namespace lrmoe::store {

// The figures of each run in `runs`, in that order. Throws StoreError naming a run not found.
std::vector<RunFigures> read_run_figures(const sqlite::Database& db,
                                         const std::vector<int64_t>& runs);
// The last run of every cell of the sweep `name` that has one, in cell order. Throws StoreError
// naming the sweeps recorded when there is none of that name.
std::vector<int64_t> read_sweep_last_runs(const sqlite::Database& db, const std::string& name);

}  // namespace lrmoe::store
