#include "core/config/toml_document.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/config/experiment_loader.hpp"

namespace lrmoe {

std::string place_in(const std::string& file, const toml::source_region& region) {
  return fmt::format("{}:{}:{}", file, region.begin.line, region.begin.column);
}

std::string read_text_file(const std::filesystem::path& file, const std::string& place) {
  std::ifstream in(file, std::ios::binary);
  if (!std::filesystem::is_regular_file(file) || !in)
    throw ConfigError(place + ": cannot read " + file.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

toml::table parse_toml(std::string_view text, const std::string& name) {
  try {
    return toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    throw ConfigError(fmt::format("{}:{}:{}: {}", name, e.source().begin.line,
                                  e.source().begin.column, e.description()));
  }
}

}  // namespace lrmoe
