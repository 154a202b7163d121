#pragma once
// The text without its leading and trailing white space, as the config's hand-written values are
// read ("64 MiB ", " train.lr = 1e-3").

#include <cctype>
#include <string_view>

namespace lrmoe {

inline std::string_view trim_whitespace(std::string_view text) {
  const auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

}  // namespace lrmoe
