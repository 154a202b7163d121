#pragma once
// Runs whose process died without finishing them (killed, crashed, machine rebooted) would
// otherwise read 'running' forever. Opening a database for writing settles them.

#include <cstdint>

#include "store/sqlite_handle.hpp"

namespace lrmoe::store {

// Marks every 'running' run recorded on this host whose process no longer exists as
// 'interrupted' (ended now) and adds a warning event to it, all in one transaction. Runs of
// other hosts are left alone: their processes cannot be checked from here. Returns how many
// runs were marked.
int64_t mark_interrupted_runs(sqlite::Database& db);

}  // namespace lrmoe::store
