#pragma once
// `lrmoe sweep SWEEP.toml [--db PATH] [--jobs N] [--retry-failed]`: runs every cell of a sweep
// (core/config/sweep_spec.hpp) as one `lrmoe run` (or `lrmoe launch`) each, tagged in the
// database with the sweep and the cell's settings. Resumable: a cell whose last run finished is
// skipped, one whose run was interrupted or stopped runs again, a failed one only with
// --retry-failed.

#include <cstdint>
#include <optional>
#include <string>

namespace lrmoe {

struct SweepOptions {
  std::string file;
  std::optional<std::string> database;  // --db; default: the base experiment's store.path
  int64_t jobs = 1;                     // cells run at once, each with its share of the cores
  bool retry_failed = false;
};

// Returns 0 when every cell has finished, 130 when stopped by Ctrl-C. Throws on user errors
// (sweep file, a cell's experiment, database) before any cell runs, and when cells failed.
int sweep_command(const SweepOptions& options);

}  // namespace lrmoe
