#include "core/config/toml_text.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cmath>
#include <sstream>

namespace lrmoe {

std::string toml_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string toml_string(const std::string& value) {
  std::ostringstream out;
  out << toml::toml_formatter{toml::value<std::string>{value},
                              toml::format_flags::allow_unicode_strings};
  return out.str();
}

}  // namespace lrmoe
