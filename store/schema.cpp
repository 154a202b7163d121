#include "store/schema.hpp"

#include <fmt/format.h>

#include "store/schema_migrations.hpp"

namespace lrmoe::store {
namespace {

int64_t read_pragma(const sqlite::Database& db, const char* name) {
  sqlite::Statement statement = db.prepare(fmt::format("PRAGMA {}", name));
  statement.step();
  return statement.column_int64(0);
}

int read_user_version(const sqlite::Database& db) {
  return static_cast<int>(read_pragma(db, "user_version"));
}

// "lrmo": the application id migration 10 writes into the file's header.
constexpr int64_t kApplicationId = 1819438447;

// Whether the file is an lrmoe database, or empty: its application id is lrmoe's, or it has
// none yet (a file from before schema 10, or a new one) and, if it has a schema version, the
// runs table of schema 1. Another program's database with a user_version of its own would
// otherwise be migrated as if it were lrmoe's.
bool looks_like_lrmoe(const sqlite::Database& db, int version) {
  const int64_t application = read_pragma(db, "application_id");
  if (application == kApplicationId) return true;
  if (application != 0) return false;
  if (version == 0) return true;  // empty, or another program's: has_schema_objects tells
  sqlite::Statement columns = db.prepare(
      "SELECT count(*) FROM pragma_table_info('runs') "
      "WHERE name IN ('resolved_toml', 'toml_sha256', 'code_version')");
  columns.step();
  return columns.column_int64(0) == 3;
}

bool has_schema_objects(const sqlite::Database& db) {
  sqlite::Statement statement = db.prepare("SELECT 1 FROM sqlite_schema LIMIT 1");
  return statement.step();
}

}  // namespace

int checked_schema_version(const sqlite::Database& db) {
  const int version = read_user_version(db);
  if (!looks_like_lrmoe(db, version)) {
    throw db.error_with_message(fmt::format(
        "is an SQLite database of another program (application id {}, schema version {}, no "
        "lrmoe runs table); it was left untouched: pass the --db path of an lrmoe results "
        "database, or a new file",
        read_pragma(db, "application_id"), version));
  }
  if (version > current_schema_version()) {
    throw db.error_with_message(fmt::format(
        "was written by a newer lrmoe (schema {}, this build knows {}); use a newer lrmoe or "
        "another --db path",
        version, current_schema_version()));
  }
  if (version == 0 && has_schema_objects(db)) {
    throw db.error_with_message(
        "is an SQLite database of another program (it has tables but no lrmoe schema "
        "version); pass another --db path");
  }
  return version;
}

void migrate(sqlite::Database& db, int target_version) {
  for (const Migration* migration = schema_migrations_begin(); migration != schema_migrations_end();
       ++migration) {
    if (migration->version > target_version) break;
    sqlite::Transaction transaction(db);
    // Read under the write lock: another process may have migrated since we last looked.
    if (read_user_version(db) >= migration->version) continue;
    db.execute(migration->sql, fmt::format("migrating to schema {}", migration->version));
    db.execute(fmt::format("PRAGMA user_version = {}", migration->version),
               fmt::format("migrating to schema {}", migration->version));
    transaction.commit();
  }
}

}  // namespace lrmoe::store

namespace lrmoe {

int current_schema_version() {
  return static_cast<int>(store::schema_migrations_end() - store::schema_migrations_begin());
}

}  // namespace lrmoe
