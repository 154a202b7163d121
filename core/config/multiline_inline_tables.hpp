#pragma once
// Inline tables over several lines, as TOML 1.1 allows them, for a TOML 1.0 parser: a sweep's
// variants read best one setting to a line, and the toml++ that Debian ships parses TOML 1.0,
// where `{ ... }` must stay on one line.

#include <string>
#include <string_view>

namespace lrmoe {

// `text` with every inline table on one line: inside `{ ... }` a newline becomes a space, a
// comment is dropped and a trailing comma before `}` is removed. The newlines an inline table
// held follow its closing `}`, so every line after it keeps its number (a place in a parse error
// inside a joined table is on its first line). Strings, multi-line ones included, and comments
// outside inline tables pass through unchanged.
std::string join_multiline_inline_tables(std::string_view text);

}  // namespace lrmoe
