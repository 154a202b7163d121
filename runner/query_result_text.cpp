#include "runner/query_result_text.hpp"

#include <regex>
#include <sstream>

#include "runner/json_text.hpp"

namespace lrmoe {
namespace {

// JSON's number grammar: no leading zeros, no '+', no bare '.', no inf or nan.
bool is_json_number(const std::string& text) {
  static const std::regex number(R"(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)");
  return std::regex_match(text, number);
}

}  // namespace

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string render_csv(const QueryResult& table) {
  std::ostringstream out;
  for (std::size_t c = 0; c < table.columns.size(); ++c)
    out << (c ? "," : "") << csv_field(table.columns[c]);
  out << "\n";
  for (const auto& row : table.rows) {
    for (std::size_t c = 0; c < row.size(); ++c)
      out << (c ? "," : "") << csv_field(row[c].value_or(""));
    out << "\n";
  }
  return out.str();
}

std::string render_json(const QueryResult& table) {
  std::ostringstream out;
  out << "[";
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    out << (r ? ",\n " : "\n ") << "{";
    const auto& row = table.rows[r];
    for (std::size_t c = 0; c < row.size(); ++c) {
      out << (c ? ", " : "") << json_string(table.columns[c]) << ": ";
      if (!row[c]) {
        out << "null";
      } else if (is_json_number(*row[c])) {
        out << *row[c];
      } else {
        out << json_string(*row[c]);
      }
    }
    out << "}";
  }
  out << (table.rows.empty() ? "]\n" : "\n]\n");
  return out.str();
}

}  // namespace lrmoe
