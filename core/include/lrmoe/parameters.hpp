#pragma once
// Parameters of a policy plugin: what a plugin declares (name, type, default, allowed values,
// meaning) and the resolved values it is constructed with. The loader checks an experiment's
// values against the declaration and fills in defaults, so a plugin reads every declared
// parameter without checking it again (Note [Plugin ABI] in docs/notes.md).

#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace lrmoe {

enum class ParameterType { Integer, Real, Boolean, Text };

using ParameterValue = std::variant<int64_t, double, bool, std::string>;

struct ParameterSpec {
  // Written as a bare TOML key and in `--set kind.name=value`: letters, digits, '_' and '-' only.
  std::string name;
  ParameterType type = ParameterType::Real;
  ParameterValue default_value = 0.0;
  std::string meaning;
  // Integer and Real: the inclusive range of allowed values.
  double minimum = -std::numeric_limits<double>::infinity();
  double maximum = std::numeric_limits<double>::infinity();
  // Text: the allowed values; empty allows any text.
  std::vector<std::string> choices;
};

// Declaration helpers, so a plugin's parameter list reads as a table.
inline ParameterSpec integer_parameter(std::string name, int64_t default_value, std::string meaning,
                                       double minimum = -std::numeric_limits<double>::infinity(),
                                       double maximum = std::numeric_limits<double>::infinity()) {
  return {std::move(name),
          ParameterType::Integer,
          default_value,
          std::move(meaning),
          minimum,
          maximum,
          {}};
}
inline ParameterSpec real_parameter(std::string name, double default_value, std::string meaning,
                                    double minimum = -std::numeric_limits<double>::infinity(),
                                    double maximum = std::numeric_limits<double>::infinity()) {
  return {std::move(name),
          ParameterType::Real,
          default_value,
          std::move(meaning),
          minimum,
          maximum,
          {}};
}
inline ParameterSpec boolean_parameter(std::string name, bool default_value, std::string meaning) {
  return {std::move(name), ParameterType::Boolean, default_value, std::move(meaning), 0, 0, {}};
}
inline ParameterSpec text_parameter(std::string name, std::string default_value,
                                    std::string meaning, std::vector<std::string> choices = {}) {
  return {
      std::move(name),   ParameterType::Text, std::move(default_value), std::move(meaning), 0, 0,
      std::move(choices)};
}

// The checked values of every declared parameter.
class Parameters {
 public:
  Parameters() = default;
  explicit Parameters(std::map<std::string, ParameterValue> values) : values_(std::move(values)) {}

  int64_t integer(const std::string& name) const { return get<int64_t>(name); }
  double real(const std::string& name) const { return get<double>(name); }
  bool boolean(const std::string& name) const { return get<bool>(name); }
  const std::string& text(const std::string& name) const { return get<std::string>(name); }

  const std::map<std::string, ParameterValue>& values() const { return values_; }

 private:
  template <typename T>
  const T& get(const std::string& name) const {
    const auto it = values_.find(name);
    if (it == values_.end() || !std::holds_alternative<T>(it->second)) {
      throw std::logic_error("plugin parameter '" + name + "' was not declared with this type");
    }
    return std::get<T>(it->second);
  }

  std::map<std::string, ParameterValue> values_;
};

}  // namespace lrmoe
