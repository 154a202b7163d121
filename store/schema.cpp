#include "store/schema.hpp"

#include <fmt/format.h>

#include <array>

namespace lrmoe::store {
namespace {

struct Migration {
  int version;
  const char* sql;
};

// Append only: a migration that has shipped never changes, because databases in the field have
// already run it. Migration N leaves the file at user_version N.
//
// SQLite stores NaN as NULL, so the REAL columns of `steps` are nullable: a diverged step (NaN
// loss) must still be written. Times are UTC text 'YYYY-MM-DDTHH:MM:SS.mmmZ'. `seed` holds the
// unsigned 64-bit seed's bit pattern (SQLite integers are signed).
constexpr std::array kMigrations = {
    Migration{1, R"sql(
CREATE TABLE runs (
  id               INTEGER PRIMARY KEY,
  name             TEXT NOT NULL,
  status           TEXT NOT NULL
                   CHECK (status IN ('running', 'finished', 'failed', 'stopped', 'interrupted')),
  started_at       TEXT NOT NULL,
  ended_at         TEXT,
  resolved_toml    TEXT NOT NULL,
  toml_sha256      TEXT NOT NULL,
  code_version     TEXT NOT NULL,
  host             TEXT NOT NULL,
  pid              INTEGER NOT NULL,
  torch_version    TEXT NOT NULL,
  blas             TEXT NOT NULL,
  seed             INTEGER NOT NULL,
  params_total     INTEGER NOT NULL,
  params_active    INTEGER NOT NULL,
  target_loss      REAL,
  ttt_step         INTEGER,
  ttt_step_seconds REAL,
  ttt_moe_seconds  REAL
);

CREATE TABLE steps (
  run          INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step         INTEGER NOT NULL,
  train_loss   REAL,
  eval_loss    REAL,
  lr           REAL,
  grad_norm    REAL,
  tokens       INTEGER NOT NULL,
  step_seconds REAL,
  moe_seconds  REAL,
  PRIMARY KEY (run, step)
) WITHOUT ROWID;

CREATE TABLE expert_load (
  run    INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step   INTEGER NOT NULL,
  layer  INTEGER NOT NULL,
  expert INTEGER NOT NULL,
  pairs  INTEGER NOT NULL,
  PRIMARY KEY (run, step, layer, expert)
) WITHOUT ROWID;

CREATE TABLE events (
  id      INTEGER PRIMARY KEY,
  run     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  time    TEXT NOT NULL,
  level   TEXT NOT NULL,
  message TEXT NOT NULL
);
)sql"},

    // Everyday queries: runs by name or status, a run's events, and two views that `lrmoe
    // query` users (and list_runs) read instead of repeating the aggregation.
    Migration{2, R"sql(
CREATE INDEX runs_by_name ON runs (name);
CREATE INDEX runs_by_status ON runs (status);
CREATE INDEX events_by_run ON events (run, id);

CREATE VIEW run_summary AS
SELECT r.id,
       r.name,
       r.status,
       r.started_at,
       r.ended_at,
       (SELECT count(*) FROM steps s WHERE s.run = r.id) AS steps,
       (SELECT s.train_loss FROM steps s WHERE s.run = r.id
        ORDER BY s.step DESC LIMIT 1) AS final_train_loss,
       (SELECT s.eval_loss FROM steps s WHERE s.run = r.id AND s.eval_loss IS NOT NULL
        ORDER BY s.step DESC LIMIT 1) AS final_eval_loss,
       r.target_loss,
       r.ttt_step,
       r.ttt_step_seconds,
       r.ttt_moe_seconds,
       r.params_total,
       r.params_active
FROM runs r;

CREATE VIEW expert_load_share AS
SELECT run,
       layer,
       expert,
       sum(pairs) AS pairs,
       CAST(sum(pairs) AS REAL)
         / NULLIF(sum(sum(pairs)) OVER (PARTITION BY run, layer), 0) AS share
FROM expert_load
GROUP BY run, layer, expert;
)sql"},
};

constexpr bool numbered_in_order() {
  for (size_t i = 0; i < kMigrations.size(); ++i) {
    if (kMigrations[i].version != static_cast<int>(i) + 1) return false;
  }
  return true;
}
static_assert(numbered_in_order(), "migration N must be the N-th entry of kMigrations");

int read_user_version(const sqlite::Database& db) {
  sqlite::Statement statement = db.prepare("PRAGMA user_version");
  statement.step();
  return static_cast<int>(statement.column_int64(0));
}

bool has_schema_objects(const sqlite::Database& db) {
  sqlite::Statement statement = db.prepare("SELECT 1 FROM sqlite_schema LIMIT 1");
  return statement.step();
}

}  // namespace

int checked_schema_version(const sqlite::Database& db) {
  const int version = read_user_version(db);
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
  for (const Migration& migration : kMigrations) {
    if (migration.version > target_version) break;
    sqlite::Transaction transaction(db);
    // Read under the write lock: another process may have migrated since we last looked.
    if (read_user_version(db) >= migration.version) continue;
    db.execute(migration.sql, fmt::format("migrating to schema {}", migration.version));
    db.execute(fmt::format("PRAGMA user_version = {}", migration.version),
               fmt::format("migrating to schema {}", migration.version));
    transaction.commit();
  }
}

}  // namespace lrmoe::store

namespace lrmoe {

int current_schema_version() { return static_cast<int>(store::kMigrations.size()); }

}  // namespace lrmoe
