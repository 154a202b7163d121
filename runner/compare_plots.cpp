#include "runner/compare_plots.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "core/system/search_folders.hpp"
#include "runner/child_status.hpp"
#include "runner/json_text.hpp"

namespace fs = std::filesystem;

namespace lrmoe {
namespace {

fs::path plotting_script() {
  const fs::path folder =
      folder_beside_executable({"plotting", fs::path("..") / "share" / "lrmoe" / "plotting"});
  const fs::path script = folder / "plot_comparison.py";
  if (folder.empty() || !fs::exists(script))
    throw std::runtime_error(
        "compare --plot: plot_comparison.py is not beside this lrmoe (plotting/) nor in "
        "share/lrmoe/plotting; rebuild or reinstall lrmoe");
  return script;
}

std::string python() {
  if (const char* chosen = std::getenv("LRMOE_PYTHON"); chosen && *chosen) return chosen;
  return fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

}  // namespace

void write_comparison_plots(const std::string& database, const std::vector<PlotVariant>& variants,
                            const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path spec = dir / "comparison.json";
  {
    std::ofstream out(spec);
    out << "{\"variants\": [\n";
    for (std::size_t i = 0; i < variants.size(); ++i) {
      const PlotVariant& v = variants[i];
      out << fmt::format("  {{\"model\": {}, \"name\": {}, \"runs\": [{}]}}{}\n",
                         json_string(v.model), json_string(v.name), fmt::join(v.runs, ", "),
                         i + 1 < variants.size() ? "," : "");
    }
    out << "]}\n";
    if (!out) throw std::runtime_error("compare --plot: cannot write " + spec.string());
  }
  const std::string interpreter = python();
  const int code = run_to_end({interpreter, plotting_script().string(), "--db", database, "--spec",
                               spec.string(), "--out", dir.string()});
  if (code != 0)
    throw std::runtime_error(fmt::format(
        "compare --plot: {} plot_comparison.py failed (exit {}, its message above); it needs "
        "matplotlib: bash scripts/setup.sh installs it for /usr/bin/python3, or set LRMOE_PYTHON "
        "to a python3 that has it",
        interpreter, code));
}

}  // namespace lrmoe
