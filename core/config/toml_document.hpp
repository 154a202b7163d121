#pragma once
// Reading a TOML file for the configuration loaders (experiments, sweeps): every failure is a
// ConfigError whose message starts with the place, "FILE:LINE:COLUMN".

#include <toml++/toml.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace lrmoe {

// "FILE:LINE:COLUMN" of `region` in `file`.
std::string place_in(const std::string& file, const toml::source_region& region);
// The bytes of `file`; `place` says where it was named, for the error when it cannot be read.
std::string read_text_file(const std::filesystem::path& file, const std::string& place);
// The TOML document in `text`; `name` stands for it in the messages.
toml::table parse_toml(std::string_view text, const std::string& name);

}  // namespace lrmoe
