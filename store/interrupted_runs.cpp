#include "store/interrupted_runs.hpp"

#include <fmt/format.h>

#include <string>

#include "store/local_process.hpp"
#include "store/utc_timestamp.hpp"

namespace lrmoe::store {
namespace {

struct RunningRun {
  int64_t id;
  int64_t pid;
  std::string start_mark;  // empty: not recorded
};

std::vector<RunningRun> running_runs_of_host(const sqlite::Database& db, const std::string& host) {
  sqlite::Statement select = db.prepare(
      "SELECT id, pid, coalesce(process_start, '') FROM runs "
      "WHERE status = 'running' AND host = ?1");
  select.bind_text(1, host);
  std::vector<RunningRun> runs;
  while (select.step())
    runs.push_back({select.column_int64(0), select.column_int64(1), select.column_text(2)});
  return runs;
}

}  // namespace

std::vector<int64_t> abandoned_runs(const sqlite::Database& db) {
  std::vector<int64_t> ids;
  for (const RunningRun& run : running_runs_of_host(db, this_host_name())) {
    if (!process_is_alive(run.pid, run.start_mark)) ids.push_back(run.id);
  }
  return ids;
}

int64_t mark_interrupted_runs(sqlite::Database& db) {
  // Cheap check first, without the write lock: almost always there is nothing to do.
  if (abandoned_runs(db).empty()) return 0;

  sqlite::Transaction transaction(db);
  const std::string host = this_host_name(), now = utc_timestamp_now();
  sqlite::Statement mark = db.prepare(
      "UPDATE runs SET status = 'interrupted', ended_at = ?2 "
      "WHERE id = ?1 AND status = 'running'");
  sqlite::Statement add_event =
      db.prepare("INSERT INTO events (run, time, level, message) VALUES (?1, ?2, 'warning', ?3)");
  int64_t marked = 0;
  // Listed again under the write lock: another process may have settled some meanwhile.
  for (const RunningRun& run : running_runs_of_host(db, host)) {
    if (process_is_alive(run.pid, run.start_mark)) continue;
    mark.bind_int64(1, run.id).bind_text(2, now);
    mark.execute();
    add_event.bind_int64(1, run.id).bind_text(2, now).bind_text(
        3, fmt::format("marked interrupted: its process (pid {} on {}) is gone", run.pid, host));
    add_event.execute();
    ++marked;
  }
  transaction.commit();
  return marked;
}

void show_abandoned_runs_as_interrupted(sqlite::Database& db) {
  const std::vector<int64_t> abandoned = abandoned_runs(db);
  if (abandoned.empty()) return;
  std::string ids;
  for (const int64_t id : abandoned) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  std::string columns;
  sqlite::Statement table = db.prepare("SELECT name FROM pragma_table_info('runs', 'main')");
  while (table.step()) {
    const std::string name = table.column_text(0);
    columns += columns.empty() ? "" : ", ";
    columns +=
        name == "status"
            ? fmt::format("CASE WHEN id IN ({}) THEN 'interrupted?' ELSE status END AS status", ids)
            : "\"" + name + "\"";
  }
  db.execute(fmt::format("CREATE TEMP VIEW runs AS SELECT {} FROM main.runs", columns),
             "showing abandoned runs as 'interrupted?'");
}

}  // namespace lrmoe::store
