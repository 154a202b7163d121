#include "core/cost/hardware_profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/config/did_you_mean.hpp"
#include "core/config/toml_text.hpp"
#include "core/cost/hardware_profile_file.hpp"
#include "core/system/one_line.hpp"
#include "core/system/search_folders.hpp"

namespace fs = std::filesystem;

namespace lrmoe {

using profile_file::fail;
using profile_file::format_rows;
using profile_file::read_profile;
using profile_file::suggestion;

namespace {

bool names_a_path(const std::string& name_or_path) {
  const std::string suffix = ".toml";
  return name_or_path.find('/') != std::string::npos ||
         (name_or_path.size() >= suffix.size() &&
          name_or_path.compare(name_or_path.size() - suffix.size(), suffix.size(), suffix) == 0);
}

std::vector<std::string> available_names(const std::vector<fs::path>& search_dirs) {
  std::vector<std::string> names;
  for (const fs::path& dir : search_dirs) {
    std::error_code error;
    if (!fs::is_directory(dir, error)) continue;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
      if (entry.path().extension() == ".toml") names.push_back(entry.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::string folder_list(const std::vector<fs::path>& dirs) {
  if (dirs.empty()) return "no folders";
  std::string text;
  for (const fs::path& dir : dirs) text += (text.empty() ? "" : ", ") + dir.string();
  return text;
}

}  // namespace

double HardwareProfile::gemm_efficiency_at(double rows) const {
  if (gemm_efficiency.empty()) return 1.0;
  const GemmEfficiencyPoint& first = gemm_efficiency.front();
  const GemmEfficiencyPoint& last = gemm_efficiency.back();
  if (!(rows > first.rows)) return first.efficiency;  // also rows <= 0 and NaN
  if (rows >= last.rows) return last.efficiency;
  // The segment [a, b] with a.rows < rows < b.rows (or rows == a.rows).
  const auto upper =
      std::upper_bound(gemm_efficiency.begin(), gemm_efficiency.end(), rows,
                       [](double r, const GemmEfficiencyPoint& p) { return r < p.rows; });
  const GemmEfficiencyPoint& b = *upper;
  const GemmEfficiencyPoint& a = *(upper - 1);
  const double t = (std::log(rows) - std::log(a.rows)) / (std::log(b.rows) - std::log(a.rows));
  return a.efficiency + t * (b.efficiency - a.efficiency);
}

std::string HardwareProfile::to_toml() const {
  std::string out;
  out += "# lrmoe hardware profile; the keys are described in experiments/hardware/README.md.\n";
  if (!source.empty()) out += "# source: " + one_line(source) + "\n";
  out += "name = " + toml_string(name) + "\n";
  out += "description = " + toml_string(description) + "\n";
  out += "peak_flops = " + toml_float(peak_flops) + "\n";
  out += "gemm_efficiency = [";
  for (std::size_t i = 0; i < gemm_efficiency.size(); ++i) {
    out += fmt::format("{}[{}, {}]", i == 0 ? "" : ", ", format_rows(gemm_efficiency[i].rows),
                       toml_float(gemm_efficiency[i].efficiency));
  }
  out += "]\n";
  out += "memory_bandwidth = " + toml_float(memory_bandwidth) + "\n";
  out += fmt::format("element_bytes = {}\n", element_bytes);
  out += fmt::format("ranks_per_node = {}\n", ranks_per_node);
  out += "intra_node_bandwidth = " + toml_float(intra_node_bandwidth) + "\n";
  out += "intra_node_latency = " + toml_float(intra_node_latency) + "\n";
  out += "inter_node_bandwidth = " + toml_float(inter_node_bandwidth) + "\n";
  out += "inter_node_latency = " + toml_float(inter_node_latency) + "\n";
  out += "host_link_bandwidth = " + toml_float(host_link_bandwidth) + "\n";
  return out;
}

HardwareProfile load_hardware_profile(const std::string& name_or_path,
                                      const std::vector<fs::path>& search_dirs) {
  if (name_or_path.empty()) {
    fail(fmt::format(
        "the hardware profile name is empty; name one of {} or give a path to a .toml file",
        quoted_list(available_names(search_dirs))));
  }
  if (names_a_path(name_or_path)) return read_profile(fs::path(name_or_path));
  for (const fs::path& dir : search_dirs) {
    const fs::path candidate = dir / (name_or_path + ".toml");
    std::error_code error;
    if (fs::exists(candidate, error)) return read_profile(candidate);
  }
  const std::vector<std::string> names = available_names(search_dirs);
  fail(
      fmt::format("unknown hardware profile '{}'{}; the profiles in {} are {}; name one of them or "
                  "\"{}\", give a "
                  "path to a .toml file, or add its folder to LRMOE_HARDWARE_PATH",
                  name_or_path, suggestion(name_or_path, names), folder_list(search_dirs),
                  names.empty() ? "none" : quoted_list(names), kThisMachineProfile));
}

std::vector<fs::path> hardware_profile_dirs() {
  std::vector<fs::path> dirs;
  const fs::path shipped =
      folder_beside_executable({"hardware", fs::path("..") / "runner" / "hardware",
                                fs::path("..") / "share" / "lrmoe" / "hardware"});
  if (!shipped.empty()) dirs.push_back(shipped);
  if (const char* path = std::getenv("LRMOE_HARDWARE_PATH")) append_folder_list(dirs, path);
  return dirs;
}

}  // namespace lrmoe
