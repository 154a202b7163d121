#include "core/config/toml_limits.hpp"

#include <fmt/format.h>

#include <vector>

#include "core/config/config_error.hpp"

namespace lrmoe {
namespace {

// A scan of TOML text that knows strings and comments, keys and values, and nothing else: enough
// to count nesting, not to validate (the library does that after).
class NestingScanner {
 public:
  NestingScanner(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  void scan() {
    bool line_start = true;
    while (at_ < text_.size()) {
      const char c = text_[at_];
      if (c == '\n') {
        newline();
        line_start = true;
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r') {
        ++at_;
        continue;
      }
      if (c == '#') {
        skip_comment();
        continue;
      }
      if (c == '"' || c == '\'') {
        skip_string(c);  // a quoted key's dots do not nest
        line_start = false;
        continue;
      }
      if (line_start && open_.empty() && c == '[') {
        header_ = true;  // [table] or [[array of tables]]: a key until the closing bracket
        key_ = false;
        key_dots_ = 0;
      } else if (header_) {
        if (c == '.') count_key_dot();
        if (c == ']') header_ = false;
      } else if (key_) {
        if (c == '.') count_key_dot();
        if (c == '=') {
          key_ = false;
          key_dots_ = 0;
        }
      } else if (c == '[' || c == '{') {
        open_.push_back(c);
        key_ = c == '{';  // an inline table starts with a key
        check_depth();
      } else if (c == ']' || c == '}') {
        if (!open_.empty()) open_.pop_back();
      } else if (c == ',' && !open_.empty() && open_.back() == '{') {
        key_ = true;  // the next key of an inline table
      }
      line_start = false;
      ++at_;
    }
  }

 private:
  // Outside arrays and inline tables a line starts with a key (or a table header).
  void newline() {
    ++at_;
    ++line_;
    line_begin_ = at_;
    header_ = false;
    if (open_.empty()) {
      key_ = true;
      key_dots_ = 0;
    }
  }

  void count_key_dot() {
    ++key_dots_;
    check_depth();
  }

  void check_depth() {
    const auto depth = static_cast<int>(open_.size()) + key_dots_;
    if (depth > kMaxTomlNesting) {
      throw ConfigError(fmt::format(
          "{}:{}:{}: nested deeper than {} levels (tables, arrays and dotted keys together); "
          "an experiment needs a few",
          name_, line_, at_ - line_begin_ + 1, kMaxTomlNesting));
    }
  }

  void skip_comment() {
    while (at_ < text_.size() && text_[at_] != '\n') ++at_;
  }

  // A basic ("...", escapes) or literal ('...') string, single- or multi-line.
  void skip_string(char quote) {
    const bool multi_line =
        text_.substr(at_, 3) == std::string_view(quote == '"' ? "\"\"\"" : "'''");
    at_ += multi_line ? 3 : 1;
    while (at_ < text_.size()) {
      const char c = text_[at_];
      if (c == '\\' && quote == '"') {
        at_ += 2;
        continue;
      }
      if (c == '\n') {
        if (!multi_line) return;  // unterminated: the library reports it
        ++line_;
        line_begin_ = at_ + 1;
      }
      if (c == quote && (!multi_line || text_.substr(at_, 3) == std::string(3, quote))) {
        at_ += multi_line ? 3 : 1;
        return;
      }
      ++at_;
    }
  }

  std::string_view text_;
  const std::string& name_;
  std::size_t at_ = 0;
  std::size_t line_ = 1;
  std::size_t line_begin_ = 0;
  std::vector<char> open_;  // '[' and '{' of the open arrays and inline tables
  bool header_ = false;
  bool key_ = true;  // reading a key: dots nest
  int key_dots_ = 0;
};

}  // namespace

void check_toml_limits(std::string_view text, const std::string& name) {
  if (text.size() > kMaxTomlBytes) {
    throw ConfigError(
        fmt::format("{}: {} bytes, larger than the {} MiB a configuration file may "
                    "be; is this the right file?",
                    name, text.size(), kMaxTomlBytes >> 20));
  }
  NestingScanner(text, name).scan();
}

}  // namespace lrmoe
