#pragma once
// The read-side commands of `lrmoe`: `runs`, `show` and `query`. Each opens the results
// database read-only, prints to `out` (standard output unless a test passes its own stream)
// and returns the process exit code. A StoreError (no such file, not a database, bad SQL)
// propagates: main prints it as "lrmoe: <message>" and exits with 1.

#include <cstdint>
#include <iostream>
#include <optional>
#include <string>

namespace lrmoe {

// Which runs `lrmoe runs` lists: every filter given must hold.
struct RunFilter {
  std::optional<std::string> status;  // running | finished | failed | stopped | interrupted
  std::optional<std::string> sweep;   // runs of this sweep's cells
  std::optional<std::string> model;   // runs of this model, by name (RunInfo::model)
  std::optional<int64_t> last;        // of those, the newest N
};

// One line per run, within 120 columns: id, name, status, start, steps, final evaluation loss,
// target and time to target (step and MoE seconds); `wide`: also model, sweep cell, policies,
// ranks, kind, final training loss and the other times to target, cells cut at 40 characters.
// An unknown status is a std::invalid_argument naming the statuses.
int run_runs_command(const std::string& db_path, const RunFilter& filter = {},
                     std::ostream& out = std::cout, bool wide = false);

// One run in full (all but its TOML) with sparklines of its train and eval loss. An unknown
// id is reported on standard error and returns 1.
int run_show_command(const std::string& db_path, int64_t run_id, std::ostream& out = std::cout);

// How `lrmoe query` prints its answer: a terminal table (cells cut to `max_width` characters;
// 0: never cut) followed by the row count, or CSV or JSON with every cell in full.
struct QueryOutput {
  std::string format = "table";  // table | csv | json
  std::size_t max_width = 40;
  double timeout_seconds = 300;   // then the query stops with a line saying so; 0: none
  int64_t max_memory_mib = 2048;  // SQLite's heap and the answer's text; 0: none
};

// One read-only SQL statement, its rows printed as `output` says. An unknown format is a
// std::invalid_argument naming the choices.
int run_query_command(const std::string& db_path, const std::string& sql,
                      const QueryOutput& output = {}, std::ostream& out = std::cout);

}  // namespace lrmoe
