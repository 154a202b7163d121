#include "runner/text_table.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <vector>

#include "core/system/one_line.hpp"

namespace lrmoe {
namespace {

bool is_utf8_continuation(char byte) {
  return (static_cast<unsigned char>(byte) & 0xC0) == 0x80;
}

size_t display_width(std::string_view utf8) {
  return static_cast<size_t>(
      std::count_if(utf8.begin(), utf8.end(), [](char c) { return !is_utf8_continuation(c); }));
}

// The first `characters` code points of `utf8`.
std::string_view leading_characters(std::string_view utf8, size_t characters) {
  size_t end = 0;
  for (size_t seen = 0; end < utf8.size(); ++end) {
    if (!is_utf8_continuation(utf8[end]) && seen++ == characters) break;
  }
  return utf8.substr(0, end);
}

std::string fit_width(std::string text, size_t max_width) {
  if (display_width(text) <= max_width) return text;
  if (max_width == 0) return {};
  return std::string(leading_characters(text, max_width - 1)) + "…";
}

bool is_number(const std::string& text) {
  if (text.empty()) return false;
  const char first = text.front();
  // strtod alone would also take leading spaces, "inf" and "nan", which read as words here.
  if (!std::isdigit(static_cast<unsigned char>(first)) && first != '-' && first != '+' &&
      first != '.') {
    return false;
  }
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

struct Column {
  std::string header;
  std::vector<std::string> cells;
  bool right_aligned = false;
  size_t width = 0;
};

Column layout_column(const QueryResult& table, size_t index, size_t max_width,
                     std::string_view null_text) {
  Column column;
  column.header = fit_width(one_line(table.columns[index]), max_width);
  bool all_numbers = true, any_value = false;
  for (const auto& row : table.rows) {
    const std::optional<std::string>& cell = index < row.size() ? row[index] : std::nullopt;
    if (cell) {
      any_value = true;
      all_numbers = all_numbers && is_number(*cell);
    }
    column.cells.push_back(fit_width(one_line(cell ? *cell : null_text), max_width));
  }
  column.right_aligned = any_value && all_numbers;
  column.width = display_width(column.header);
  for (const std::string& cell : column.cells) {
    column.width = std::max(column.width, display_width(cell));
  }
  return column;
}

void append_padded(std::string& line, const std::string& text, const Column& column) {
  const std::string padding(column.width - display_width(text), ' ');
  line += column.right_aligned ? padding + text : text + padding;
}

void end_line(std::string& out, std::string& line) {
  line.erase(line.find_last_not_of(' ') + 1);
  out += line;
  out += '\n';
  line.clear();
}

}  // namespace

std::string render_text_table(const QueryResult& table, size_t max_column_width,
                              std::string_view null_text) {
  if (table.columns.empty()) return {};
  std::vector<Column> columns;
  for (size_t index = 0; index < table.columns.size(); ++index) {
    columns.push_back(layout_column(table, index, max_column_width, null_text));
  }
  const std::string gap = "  ";
  std::string out, line;
  for (size_t c = 0; c < columns.size(); ++c) {
    line += c ? gap : "";
    append_padded(line, columns[c].header, columns[c]);
  }
  end_line(out, line);
  for (size_t c = 0; c < columns.size(); ++c) {
    line += c ? gap : "";
    line += std::string(columns[c].width, '-');
  }
  end_line(out, line);
  for (size_t r = 0; r < table.rows.size(); ++r) {
    for (size_t c = 0; c < columns.size(); ++c) {
      line += c ? gap : "";
      append_padded(line, columns[c].cells[r], columns[c]);
    }
    end_line(out, line);
  }
  return out;
}

}  // namespace lrmoe
