#include "core/config/toml_text.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cmath>
#include <cstdint>
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

bool is_bare_toml_key(std::string_view key) {
  if (key.empty()) return false;
  for (const char c : key) {
    const bool bare = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-';
    if (!bare) return false;
  }
  return true;
}

std::string toml_key(const std::string& key) {
  return is_bare_toml_key(key) ? key : toml_string(key);
}

bool is_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const int length = lead < 0x80           ? 1
                       : (lead >> 5) == 0x6  ? 2
                       : (lead >> 4) == 0xE  ? 3
                       : (lead >> 3) == 0x1E ? 4
                                             : 0;
    if (length == 0 || i + static_cast<std::size_t>(length) > text.size()) return false;
    uint32_t code = length == 1 ? lead : lead & (0x7F >> length);
    for (int k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kSmallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
      return false;
    i += static_cast<std::size_t>(length);
  }
  return true;
}

}  // namespace lrmoe
