#pragma once
// `lrmoe compare (--sweep NAME... | RUN...) [--db PATH] [--baseline VARIANT] [--format F]`: per
// model, one row per policy variant over its seeds: time to target (steps, MoE critical path,
// modeled), peak memory subtotal, pairs dropped in forward and kept in backward, each as the
// median with its range, and against a baseline variant as a reduction with a bootstrap
// interval. Runs that did not reach the target count as such (runner/seed_statistics.hpp).
//
// Runs are seeds of one variant exactly when their resolved configurations, plugin parameters
// included, are equal (runner/variant_grouping.hpp), whichever sweeps they come from: a sweep of
// controls pools with the sweep that holds their baseline where their settings agree, and
// nothing else pools. A variant goes by its sweep cell's labels, its cell's settings or its
// policies, with the settings that tell it apart from a namesake; the table says which settings
// differ between a model's variants, flags intervals from fewer than three seeds and seeds that
// repeat. With --plot DIR [--x AXIS], figures too (runner/compare_plots.hpp).

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace lrmoe {

struct CompareOptions {
  std::vector<int64_t> runs;
  std::vector<std::string> sweeps;  // the last run of each of their cells
  std::string database = "lrmoe.db";
  std::optional<std::string> baseline;  // a variant's name, as the table shows it
  std::string format = "table";         // table | csv | json | markdown
  std::optional<std::string> plot_dir;  // --plot: figures there (runner/compare_plots.hpp)
  std::vector<std::string> columns;     // the table's figures, by name; empty: the default ones
  std::string plot_x = "critical";      // --x: their loss figure's axis (PlotAxis)
};

// The comparison goes to `out`; with the machine formats (CSV, JSON), which must stay parseable,
// the note naming runs left out goes to `notes`. Throws StoreError (database, unknown run or
// sweep) and std::invalid_argument (no runs, a baseline no model has, an unknown format or --x).
int compare_command(const CompareOptions& options, std::ostream& out, std::ostream& notes);

}  // namespace lrmoe
