#pragma once
// Sweeps in the results database (schema 7): a sweep's cells, found again by their settings when
// a sweep is resumed, and the runs of each cell.

#include <cstdint>
#include <vector>

#include "store/results_store.hpp"
#include "store/sqlite_handle.hpp"

namespace lrmoe::store {

// Records the sweep or finds it by name (refusing a sweep of the other kind under that name);
// returns its id and the number of each given cell.
SweepCellNumbers record_sweep(sqlite::Database& db, const SweepRecord& sweep);
// The sweep's cells in number order, each with its last run.
std::vector<SweepCellState> read_sweep_cells(const sqlite::Database& db, int64_t sweep);
// Tags `run` as a run of the cell and names it "SWEEP/CELL", its model the cell's model label
// where it has one (within the caller's transaction).
void add_sweep_run(sqlite::Database& db, int64_t run, const SweepCellTag& tag,
                   const std::string& experiment_identity);

}  // namespace lrmoe::store
