// Fuzz target: an experiment file, resolved with `extends` against a folder holding a valid base
// experiment (base.toml). Every input must either load or fail with a ConfigError; any other
// exception, a crash, a hang or a sanitizer report is a finding.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "core/config/experiment_loader.hpp"

namespace {

std::filesystem::path base_folder() {
  static const std::filesystem::path folder = [] {
    const auto path = std::filesystem::temp_directory_path() / "lrmoe-fuzz-experiment";
    std::filesystem::create_directories(path);
    std::ofstream(path / "base.toml") << "[model]\npreset = \"tiny-moe\"\n[train]\nmax_steps = 3\n";
    return path;
  }();
  return folder;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const lrmoe::Experiment experiment =
        lrmoe::load_experiment_text(text, "fuzz.toml", {}, base_folder());
    // What loads must write back as TOML that loads to the same text.
    const std::string resolved = lrmoe::to_toml(experiment);
    if (lrmoe::to_toml(lrmoe::load_experiment_text(resolved, "resolved.toml")) != resolved)
      __builtin_trap();
  } catch (const lrmoe::ConfigError&) {
  }
  return 0;
}
