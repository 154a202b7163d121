#pragma once
// `lrmoe query`: one read-only SQL statement, its rows returned as text.

#include <string>

#include "store/results_store.hpp"
#include "store/sqlite_handle.hpp"

namespace lrmoe::store {

// Refuses, with a StoreError saying why, an empty query, more than one statement, and any
// statement that could write (sqlite3_stmt_readonly); stops, likewise, one that runs past
// `limits` or is asked to stop. Values come back as SQLite prints them; BLOBs as hex literals
// (X'0A1B').
QueryResult run_read_only_query(const sqlite::Database& db, const std::string& sql,
                                const QueryLimits& limits = {});

}  // namespace lrmoe::store
