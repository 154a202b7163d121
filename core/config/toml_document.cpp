#include "core/config/toml_document.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/config/config_error.hpp"
#include "core/config/toml_limits.hpp"
#include "core/system/file_kind.hpp"

namespace lrmoe {

std::string place_in(const std::string& file, const toml::source_region& region) {
  return fmt::format("{}:{}:{}", file, region.begin.line, region.begin.column);
}

std::string read_text_file(const std::filesystem::path& file, const std::string& place) {
  // Before opening: opening a FIFO waits for a writer.
  if (const std::string why = not_a_regular_file(file); !why.empty())
    throw ConfigError(place + ": cannot read " + file.string() + " (" + why + ")");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(place + ": cannot read " + file.string() + " (permission denied?)");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

toml::table parse_toml(std::string_view text, const std::string& name) {
  check_toml_limits(text, name);
  try {
    return toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    throw ConfigError(fmt::format("{}:{}:{}: {}", name, e.source().begin.line,
                                  e.source().begin.column, e.description()));
  }
}

}  // namespace lrmoe
