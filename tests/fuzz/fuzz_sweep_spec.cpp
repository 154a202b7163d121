// Fuzz target: a sweep file (its axes, kinds, labels and multi-line inline tables). Every input
// must either load or fail with a ConfigError; joining its inline tables must keep its number of
// lines, so that every place a message names stays right. Any other exception, a crash, a hang
// or a sanitizer report is a finding.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "core/config/experiment_loader.hpp"
#include "core/config/multiline_inline_tables.hpp"
#include "core/config/sweep_spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string joined = lrmoe::join_multiline_inline_tables(text);
  if (std::count(joined.begin(), joined.end(), '\n') != std::count(text.begin(), text.end(), '\n'))
    __builtin_trap();
  static const std::filesystem::path file =
      std::filesystem::temp_directory_path() / "lrmoe-fuzz-sweep.toml";
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(text.data(), text.size());
  try {
    const lrmoe::SweepSpec spec = lrmoe::load_sweep_spec(file);
    for (const lrmoe::SweepCell& cell : spec.cells) spec.overrides(cell);
  } catch (const lrmoe::ConfigError&) {
  }
  return 0;
}
