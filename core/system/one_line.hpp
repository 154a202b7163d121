#pragma once
// Text that must stay on one line (an error line, a table cell, a TOML comment) though it quotes
// what a user wrote: a newline becomes "↵", any other control character a space.

#include <string>
#include <string_view>

namespace lrmoe {

std::string one_line(std::string_view text);

}  // namespace lrmoe
