#pragma once
// `lrmoe compare --plot DIR [--x AXIS]`: the comparison's figures, drawn with matplotlib by
// notebooks/plot_comparison.py (installed as share/lrmoe/plotting/plot_comparison.py), which
// reads the database itself. lrmoe writes DIR/comparison.json (the variants and their runs, the
// axis, and what the script must not recompute: compare's reductions and the runs' projections)
// and runs the script with LRMOE_PYTHON, else Debian's /usr/bin/python3 (where scripts/setup.sh
// installs matplotlib), else python3 from PATH.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "runner/seed_statistics.hpp"
#include "store/results_store.hpp"

namespace lrmoe {

// What the loss figure's x axis measures (--x): steps, or the cumulative MoE time on the
// critical path measured on this machine, modeled by the cost model at the run's size, or
// projected at full size (lrmoe project, at runner/headline_projection.hpp's configuration).
enum class PlotAxis { Steps, Critical, Modeled, Projected };

// Throws std::invalid_argument, one line naming --x and the names allowed, for any other name.
PlotAxis plot_axis_named(const std::string& name);

// The figure of lrmoe compare (its CSV and JSON name) that is the time to target along `axis`:
// the one whose reductions the reductions figure shows.
std::string time_to_target_figure(PlotAxis axis);

struct PlotVariant {
  std::string model;
  std::string name;
  std::vector<int64_t> runs;  // one per seed
  int64_t reached = 0;        // seeds that reached the target
  // Of the median time to target along the axis, against the baseline, as lrmoe compare prints
  // it; none for the baseline itself, without a baseline, or where compare shows none.
  std::optional<Reduction> reduction;
};

struct PlotRequest {
  std::string database;
  std::vector<std::string> sweeps;  // named on the command line: they name the comparison
  PlotAxis x = PlotAxis::Critical;
  std::optional<std::string> baseline;
};

// Writes the figures (PNG and SVG) into `dir`, creating it. `projections`: the runs' recorded
// projections, by run. With x = projected, a run whose plans do not fit at full size is left out
// of the loss figure, with a line in `notes`. Throws std::runtime_error naming what to install
// when the script cannot run, and, with x = projected, naming the runs without a projection and
// the lrmoe project command that makes them.
void write_comparison_plots(const PlotRequest& request, const std::vector<PlotVariant>& variants,
                            const std::map<int64_t, std::vector<ProjectionRecord>>& projections,
                            const std::filesystem::path& dir, std::ostream& notes);

}  // namespace lrmoe
