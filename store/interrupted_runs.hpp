#pragma once
// Runs whose process died without finishing them (killed, crashed, machine rebooted) would
// otherwise read 'running' forever. Opening a database for writing settles them; a reader that
// may not write reports them as 'interrupted?', in its summaries and in `lrmoe query` alike.

#include <cstdint>
#include <vector>

#include "store/sqlite_handle.hpp"

namespace lrmoe::store {

// The 'running' runs recorded on this host whose process no longer exists (or whose id now
// names a process started later), by id. Reads only. Runs of other hosts are left out: their
// processes cannot be checked from here.
std::vector<int64_t> abandoned_runs(const sqlite::Database& db);

// Marks every run of abandoned_runs as 'interrupted' (ended now) and adds a warning event to it,
// all in one transaction. Returns how many runs were marked.
int64_t mark_interrupted_runs(sqlite::Database& db);

// For a reader: on this connection only, `runs` reads 'interrupted?' as the status of the runs
// of abandoned_runs. A TEMP view named runs, which SQLite resolves before the file's own table
// (still readable as main.runs), with main.runs' columns in their order. Writes nothing to the
// file; does nothing when no run is abandoned.
void show_abandoned_runs_as_interrupted(sqlite::Database& db);

}  // namespace lrmoe::store
