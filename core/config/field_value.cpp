#include "core/config/field_value.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/config/byte_size.hpp"
#include "core/config/config_error.hpp"
#include "core/config/did_you_mean.hpp"
#include "core/config/exact_number.hpp"
#include "core/config/toml_text.hpp"

namespace lrmoe {
namespace {

class FieldReader {
 public:
  FieldReader(const FieldDescriptor& field, const toml::node& node, const std::string& place)
      : field_(field), node_(node), place_(place) {}

  FieldValue read() const {
    switch (field_.kind) {
      case FieldKind::Integer:
        return in_range(read_integer());
      case FieldKind::Float:
        return in_range(read_float());
      case FieldKind::Bool:
        return read_bool();
      case FieldKind::String:
        return read_string("a string");
      case FieldKind::Choice:
        return read_choice();
      case FieldKind::ByteSize:
        return in_range(read_byte_size());
    }
    throw std::logic_error("unhandled field kind");
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    throw ConfigError(place_ + ": " + field_.name() + " " + problem);
  }

  [[noreturn]] void wrong_type(const std::string& expected) const {
    fail("must be " + expected + ", got " + toml_type_name(node_));
  }

  int64_t read_integer() const {
    if (!node_.is_integer()) wrong_type("an integer");
    return node_.as_integer()->get();
  }

  double read_float() const {
    if (const auto* whole = node_.as_integer()) {
      if (const std::string problem = whole_number_as_double_problem(whole->get());
          !problem.empty())
        fail(problem);
      return static_cast<double>(whole->get());
    }
    if (!node_.is_floating_point()) wrong_type("a number");
    const double value = node_.as_floating_point()->get();
    if (const std::string problem = non_finite_problem(value); !problem.empty()) fail(problem);
    return value;
  }

  bool read_bool() const {
    if (!node_.is_boolean()) wrong_type("true or false");
    return node_.as_boolean()->get();
  }

  std::string read_string(const std::string& expected) const {
    if (!node_.is_string()) wrong_type(expected);
    const std::string& text = node_.as_string()->get();
    // A NUL would cut the text short wherever it becomes a C string (a path, SQL).
    if (text.find('\0') != std::string::npos) fail("must not contain a NUL character");
    return text;
  }

  std::string read_choice() const {
    const std::string choices = quoted_list(field_.choices);
    const std::string value = read_string("one of " + choices);
    if (std::find(field_.choices.begin(), field_.choices.end(), value) == field_.choices.end()) {
      fail("must be one of " + choices + ", got '" + value + "'" +
           did_you_mean(value, field_.choices));
    }
    return value;
  }

  uint64_t read_byte_size() const {
    if (node_.is_integer()) {
      const int64_t bytes = node_.as_integer()->get();
      if (bytes < 0) fail("must be " + field_.range.describe() + ", got " + std::to_string(bytes));
      return static_cast<uint64_t>(bytes);
    }
    const std::string text = read_string("a byte size (e.g. \"64MiB\") or a number of bytes");
    try {
      return parse_byte_size(text);
    } catch (const std::invalid_argument& e) {
      fail("'" + text + "' is not a byte size: " + e.what());
    }
  }

  template <typename Number>
  FieldValue in_range(Number value) const {
    if (!field_.range.contains(static_cast<double>(value))) {
      fail("must be " + field_.range.describe() + ", got " + fmt::format("{}", value));
    }
    return FieldValue{value};
  }

  const FieldDescriptor& field_;
  const toml::node& node_;
  const std::string& place_;
};

}  // namespace

FieldValue read_field_value(const FieldDescriptor& field, const toml::node& node,
                            const std::string& place) {
  return FieldReader(field, node, place).read();
}

std::string field_value_toml(const FieldValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>) {
          return toml_float(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return toml_string(v);
        } else if constexpr (std::is_same_v<T, uint64_t>) {
          return toml_string(format_byte_size(v));
        } else {
          return std::to_string(v);
        }
      },
      value);
}

std::string toml_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

}  // namespace lrmoe
