#include "core/config/multiline_inline_tables.hpp"

namespace lrmoe {
namespace {

// Where the scan is: which kind of string or comment it is in, if any.
enum class Context { Value, BasicString, LiteralString, MultilineBasic, MultilineLiteral, Comment };

bool starts_with(std::string_view text, std::size_t at, std::string_view prefix) {
  return text.substr(at, prefix.size()) == prefix;
}

// Drops the spaces at the end of `out` and, if it then ends with a comma, the comma.
void drop_trailing_comma(std::string& out) {
  std::size_t end = out.find_last_not_of(" \t");
  if (end != std::string::npos && out[end] == ',') out.erase(end);
}

}  // namespace

std::string join_multiline_inline_tables(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  Context context = Context::Value;
  int depth = 0;         // of inline tables open at this point
  std::size_t held = 0;  // newlines taken out of the open inline tables
  bool comment_in_table = false;
  std::size_t i = 0;
  // Copies `delimiter` when the text at i starts with it, leaving i on its last character.
  auto take = [&](std::string_view delimiter) {
    if (!starts_with(text, i, delimiter)) return false;
    out += delimiter;
    i += delimiter.size() - 1;
    return true;
  };
  for (; i < text.size(); ++i) {
    const char c = text[i];
    switch (context) {
      case Context::Comment:
        if (c == '\n') {
          context = Context::Value;
          if (comment_in_table) {
            ++held;
            out += ' ';
          } else {
            out += c;
          }
        } else if (!comment_in_table) {
          out += c;
        }
        continue;
      case Context::BasicString:
        out += c;
        if (c == '\\' && i + 1 < text.size()) {
          out += text[++i];
        } else if (c == '"' || c == '\n') {
          context = Context::Value;  // a newline ends a broken string: the parser reports it
        }
        continue;
      case Context::LiteralString:
        out += c;
        if (c == '\'' || c == '\n') context = Context::Value;
        continue;
      case Context::MultilineBasic:
        if (c == '\\' && i + 1 < text.size()) {
          out += c;
          out += text[++i];
        } else if (take("\"\"\"")) {
          context = Context::Value;
        } else {
          out += c;
        }
        continue;
      case Context::MultilineLiteral:
        if (take("'''")) {
          context = Context::Value;
        } else {
          out += c;
        }
        continue;
      case Context::Value:
        break;
    }
    if (take("\"\"\"")) {
      context = Context::MultilineBasic;
    } else if (take("'''")) {
      context = Context::MultilineLiteral;
    } else if (c == '"') {
      out += c;
      context = Context::BasicString;
    } else if (c == '\'') {
      out += c;
      context = Context::LiteralString;
    } else if (c == '#') {
      context = Context::Comment;
      comment_in_table = depth > 0;
      if (!comment_in_table) out += c;
    } else if (c == '{') {
      ++depth;
      out += c;
    } else if (c == '}' && depth > 0) {
      drop_trailing_comma(out);
      out += " }";
      if (--depth == 0) {
        out.append(held, '\n');
        held = 0;
      }
    } else if (c == '\n' && depth > 0) {
      ++held;
      out += ' ';
    } else if (c == '\r' && depth > 0) {
      out += ' ';
    } else {
      out += c;
    }
  }
  out.append(held, '\n');  // an inline table left open: the parser reports it where it was
  return out;
}

}  // namespace lrmoe
