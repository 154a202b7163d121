#include "core/plugins/policy_parameters.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/config/did_you_mean.hpp"
#include "core/config/exact_number.hpp"
#include "core/config/toml_text.hpp"
#include "core/plugins/parameter_text.hpp"

namespace lrmoe {
namespace {

// The value converted to the declared type; integers are accepted where a number is declared.
// `what` names the value in the error: "exp.toml:3:1: parameter 'x' of the metric plugin 'y'".
ParameterValue checked_value(const ParameterSpec& spec, const ParameterValue& value,
                             const std::string& what) {
  auto wrong = [&](const std::string& why) { return PluginError(what + " " + why); };
  switch (spec.type) {
    case ParameterType::Integer:
    case ParameterType::Real: {
      double number = 0;
      if (const auto* i = std::get_if<int64_t>(&value)) {
        if (spec.type == ParameterType::Real) {
          if (const std::string problem = whole_number_as_double_problem(*i); !problem.empty())
            throw wrong(problem);
        }
        number = static_cast<double>(*i);
      } else if (const auto* d = std::get_if<double>(&value);
                 d && spec.type == ParameterType::Real) {
        number = *d;
      } else {
        throw wrong(spec.type == ParameterType::Integer ? "must be an integer"
                                                        : "must be a number");
      }
      if (const std::string problem = non_finite_problem(number); !problem.empty())
        throw wrong(problem);
      if (!(number >= spec.minimum && number <= spec.maximum)) {
        const bool bounded = std::isfinite(spec.minimum) && std::isfinite(spec.maximum);
        throw wrong(fmt::format("must be {}{}, got {}", bounded ? "in " : "",
                                parameter_allowed_text(spec), number));
      }
      if (spec.type == ParameterType::Integer) return std::get<int64_t>(value);
      return number;
    }
    case ParameterType::Boolean:
      if (!std::holds_alternative<bool>(value)) throw wrong("must be true or false");
      return value;
    case ParameterType::Text: {
      const auto* text = std::get_if<std::string>(&value);
      if (text == nullptr) throw wrong("must be a string");
      if (!spec.choices.empty() &&
          std::find(spec.choices.begin(), spec.choices.end(), *text) == spec.choices.end()) {
        throw wrong("must be one of " + quoted_list(spec.choices) +
                    did_you_mean(*text, spec.choices));
      }
      return value;
    }
  }
  return value;
}

}  // namespace

Parameters resolve_parameters(const PluginInfo& plugin,
                              const std::map<std::string, PolicySetting>& settings) {
  const PluginDescriptor& descriptor = plugin.descriptor;
  std::vector<std::string> declared;
  for (const ParameterSpec& spec : descriptor.parameters) declared.push_back(spec.name);

  for (const auto& [name, setting] : settings) {
    if (std::find(declared.begin(), declared.end(), name) == declared.end()) {
      const std::string valid =
          declared.empty() ? "it takes no parameters" : "its parameters: " + quoted_list(declared);
      const std::string suggestion = did_you_mean(name, declared);
      throw PluginError(fmt::format("{}: the {} plugin '{}' has no parameter '{}'{}", setting.place,
                                    kind_name(descriptor.kind), descriptor.name, name,
                                    suggestion.empty() ? "; " + valid : suggestion));
    }
  }
  std::map<std::string, ParameterValue> values;
  for (const ParameterSpec& spec : descriptor.parameters) {
    const auto it = settings.find(spec.name);
    values[spec.name] =
        it == settings.end()
            ? spec.default_value
            : checked_value(
                  spec, it->second.value,
                  fmt::format("{}: parameter '{}' of the {} plugin '{}'", it->second.place,
                              spec.name, kind_name(descriptor.kind), descriptor.name));
  }
  return Parameters(std::move(values));
}

void check_parameter_declarations(const PluginDescriptor& descriptor,
                                  const std::filesystem::path& library) {
  std::vector<std::string> seen;
  for (const ParameterSpec& spec : descriptor.parameters) {
    const std::string what =
        fmt::format("{}: the {} plugin '{}' declares parameter '{}'", library.string(),
                    kind_name(descriptor.kind), descriptor.name, spec.name);
    auto wrong = [&](const std::string& why) {
      return PluginError(
          fmt::format("{} {}; fix its describe_policy call and rebuild it", what, why));
    };
    if (spec.name.empty()) throw wrong("with no name");
    // An experiment names the parameter as a bare TOML key and in `--set kind.name=value`.
    if (!is_bare_toml_key(spec.name)) {
      throw wrong("whose name is not only letters, digits, '_' and '-'");
    }
    if (std::find(seen.begin(), seen.end(), spec.name) != seen.end()) throw wrong("twice");
    seen.push_back(spec.name);
    const bool numeric = spec.type == ParameterType::Integer || spec.type == ParameterType::Real;
    if (numeric && !(spec.minimum <= spec.maximum)) {
      throw wrong(fmt::format("with minimum {} above maximum {}", spec.minimum, spec.maximum));
    }
    try {
      checked_value(spec, spec.default_value, "its default");
    } catch (const PluginError& error) {
      throw wrong(fmt::format("whose default is not allowed: {}", error.what()));
    }
  }
}

}  // namespace lrmoe
