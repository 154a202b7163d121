#pragma once
// The results database schema: an ordered list of forward migrations (store/schema.cpp). The
// file's PRAGMA user_version is the number of migrations applied; current_schema_version()
// (results_store.hpp) is the number this build knows.

#include "store/sqlite_handle.hpp"

namespace lrmoe::store {

// The file's schema version, after refusing files we must not touch: one written by a newer
// lrmoe, or an SQLite database of some other program (tables but no schema version). The
// first read of the file also surfaces "file is not a database".
int checked_schema_version(const sqlite::Database& db);

// Applies, in order, every migration above the file's version up to `target_version`, each in
// its own transaction together with its user_version bump.
void migrate(sqlite::Database& db, int target_version);

}  // namespace lrmoe::store
