#pragma once
// `lrmoe compare --plot DIR`: the comparison's figures, drawn with matplotlib by
// notebooks/plot_comparison.py (installed as share/lrmoe/plotting/plot_comparison.py), which
// reads the database itself. lrmoe writes DIR/comparison.json (the variants and their runs) and
// runs the script with LRMOE_PYTHON, else Debian's /usr/bin/python3 (where scripts/setup.sh
// installs matplotlib), else python3 from PATH.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace lrmoe {

struct PlotVariant {
  std::string model;
  std::string name;
  std::vector<int64_t> runs;  // one per seed
};

// Writes the figures (PNG and SVG) into `dir`, creating it. Throws std::runtime_error naming what
// to install when the script cannot run.
void write_comparison_plots(const std::string& database, const std::vector<PlotVariant>& variants,
                            const std::filesystem::path& dir);

}  // namespace lrmoe
