#pragma once
// Values written as TOML text that reads back to the identical value: the resolved experiment,
// plugin parameters and hardware profiles are stored as TOML.

#include <string>
#include <string_view>

namespace lrmoe {

// The shortest text that reads back as the same double, always with a '.' or an exponent (or
// nan / inf) so that TOML reads it as a float again: `0.003`, `1000000.0`, `1e+20`.
std::string toml_float(double value);
// A basic "..." string with escapes only: one deterministic spelling, whatever the text holds.
// `value` must be UTF-8 (as every TOML string is): other bytes would be escaped one by one and
// read back as different text.
std::string toml_string(const std::string& value);

// A key as TOML writes it: bare when it is only ASCII letters, digits, '_' and '-', otherwise a
// quoted string, so that a key such as `#(` is not read back as a comment.
std::string toml_key(const std::string& key);
// Whether `key` may be written bare in TOML: non-empty, only [A-Za-z0-9_-].
bool is_bare_toml_key(std::string_view key);

// Whether `text` is valid UTF-8 (no stray continuation bytes, no overlong or surrogate forms,
// nothing above U+10FFFF): what a TOML string may hold.
bool is_valid_utf8(std::string_view text);

}  // namespace lrmoe
