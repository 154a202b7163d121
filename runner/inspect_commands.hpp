#pragma once
// The read-side commands of `lrmoe`: `runs`, `show` and `query`. Each opens the results
// database read-only, prints to `out` (standard output unless a test passes its own stream)
// and returns the process exit code. A StoreError (no such file, not a database, bad SQL)
// propagates: main prints it as "lrmoe: <message>" and exits with 1.

#include <cstdint>
#include <iostream>
#include <string>

namespace lrmoe {

// One line per run: id, name, status, start, steps, final losses, target and time to target.
int run_runs_command(const std::string& db_path, std::ostream& out = std::cout);

// One run in full (all but its TOML) with sparklines of its train and eval loss. An unknown
// id is reported on standard error and returns 1.
int run_show_command(const std::string& db_path, int64_t run_id, std::ostream& out = std::cout);

// How `lrmoe query` prints its answer: a terminal table (cells cut to `max_width` characters;
// 0: never cut) followed by the row count, or CSV or JSON with every cell in full.
struct QueryOutput {
  std::string format = "table";  // table | csv | json
  std::size_t max_width = 40;
};

// One read-only SQL statement, its rows printed as `output` says. An unknown format is a
// std::invalid_argument naming the choices.
int run_query_command(const std::string& db_path, const std::string& sql,
                      const QueryOutput& output = {}, std::ostream& out = std::cout);

}  // namespace lrmoe
