#pragma once
// Reading experiments: TOML files (with `extends = "base.toml"` inheritance), the embedded
// default, and `--set section.key=value` overrides from the command line, resolved into a typed
// Experiment and checked against the schema (core/config/experiment_schema.cpp).

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/config_error.hpp"
#include "core/config/experiment.hpp"

namespace lrmoe {

// Loads `file` (following `extends`), applies `overrides` ("section.key=value", in order) and
// validates the result. Throws ConfigError.
Experiment load_experiment(const std::filesystem::path& file,
                           const std::vector<std::string>& overrides = {});

// The same for TOML text that did not come from a file (the embedded default experiment);
// `source_name` stands for the file name in messages. `extends` is resolved against `base_dir`.
Experiment load_experiment_text(std::string_view toml, const std::string& source_name,
                                const std::vector<std::string>& overrides = {},
                                const std::filesystem::path& base_dir = ".");

// The fully resolved experiment as TOML: every field of every section, with the preset's
// dimensions written out. This is what a run stores; loading it gives the same Experiment.
std::string to_toml(const Experiment& experiment);

// The schema as a Markdown table (section, key, type, default, range, meaning).
std::string schema_markdown();

}  // namespace lrmoe
