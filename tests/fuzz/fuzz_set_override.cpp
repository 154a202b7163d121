// Fuzz target: command-line overrides. Each line of the input is one `--set` argument, applied to
// the tiny experiment. Every input must either load or fail with a ConfigError.
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/config/experiment_loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream lines(std::string(reinterpret_cast<const char*>(data), size));
  std::vector<std::string> overrides;
  for (std::string line; std::getline(lines, line);) overrides.push_back(line);
  try {
    const lrmoe::Experiment experiment =
        lrmoe::load_experiment_text("[model]\npreset = \"tiny-moe\"\n", "tiny.toml", overrides);
    const std::string resolved = lrmoe::to_toml(experiment);
    if (lrmoe::to_toml(lrmoe::load_experiment_text(resolved, "resolved.toml")) != resolved)
      __builtin_trap();
  } catch (const lrmoe::ConfigError&) {
  }
  return 0;
}
