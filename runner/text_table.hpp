#pragma once
// Plain-text tables for the terminal (`lrmoe runs`, `lrmoe query`).

#include <cstddef>
#include <string>
#include <string_view>

#include "store/results_store.hpp"

namespace lrmoe {

// The header, a rule of dashes, then one line per row; columns two spaces apart, no trailing
// spaces, every line ending in '\n'. A column whose cells are all numbers (NULLs aside) is
// right-aligned, header included. Widths count characters (UTF-8 code points), not bytes; a
// cell wider than `max_column_width` is cut to it and ends in '…'. Line breaks and tabs inside
// a cell print as '↵' and a space, so that every row stays on one line.
std::string render_text_table(const QueryResult& table, size_t max_column_width = 40,
                              std::string_view null_text = "NULL");

}  // namespace lrmoe
