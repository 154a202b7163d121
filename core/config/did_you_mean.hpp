#pragma once
// Suggestions for misspelt names (keys, sections, choices, presets) in configuration errors.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace lrmoe {

// Optimal-string-alignment distance: inserting, deleting or replacing a character, or swapping
// two neighbours, each cost one, so "modle" is one edit away from "model".
std::size_t edit_distance(std::string_view a, std::string_view b);

// "; did you mean 'x'?" when one of `candidates` is close enough to `word` to be a likely typo
// of it, otherwise "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

// "'a', 'b', 'c'".
std::string quoted_list(const std::vector<std::string>& names);

}  // namespace lrmoe
