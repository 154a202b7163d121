#pragma once
// Limits on a TOML text checked before the TOML library parses it. The library recurses once per
// level of nesting (a table header of 50,000 dotted keys, arrays in arrays), so a hostile file
// could overflow the stack; no experiment, sweep or profile comes near these limits.

#include <cstddef>
#include <string>
#include <string_view>

namespace lrmoe {

inline constexpr std::size_t kMaxTomlBytes = std::size_t{4} << 20;  // 4 MiB
inline constexpr int kMaxTomlNesting = 64;  // arrays, inline tables and dotted keys together

// Throws ConfigError "NAME:LINE:COLUMN: ..." where `text` is larger than kMaxTomlBytes or nests
// deeper than kMaxTomlNesting: the nesting at a point is the number of open arrays and inline
// tables plus the dots of the key being read (a table header's or a key's before its '=').
void check_toml_limits(std::string_view text, const std::string& name);

}  // namespace lrmoe
