#pragma once
// A query's answer as CSV or JSON, every cell in full (`lrmoe query --format csv|json`; the
// terminal table is text_table.hpp's).

#include <string>

#include "store/results_store.hpp"

namespace lrmoe {

// One CSV field (RFC 4180): as it is, or quoted with its quotes doubled where it holds a comma,
// a quote or a line break.
std::string csv_field(const std::string& text);

// The header, then one line per row; NULL is an empty field.
std::string render_csv(const QueryResult& table);

// An array with one object per row, keys the column names in order. A cell that reads as a JSON
// number is written as one (SQLite's text of its INTEGER and REAL values does), every other as a
// string; NULL is null.
std::string render_json(const QueryResult& table);

}  // namespace lrmoe
