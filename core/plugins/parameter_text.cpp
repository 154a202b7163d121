#include "core/plugins/parameter_text.hpp"

#include <fmt/format.h>

#include <cmath>

namespace lrmoe {

std::string parameter_type_name(ParameterType type) {
  switch (type) {
    case ParameterType::Integer:
      return "integer";
    case ParameterType::Real:
      return "number";
    case ParameterType::Boolean:
      return "bool";
    case ParameterType::Text:
      return "string";
  }
  return "?";
}

std::string parameter_allowed_text(const ParameterSpec& spec) {
  if (spec.type == ParameterType::Boolean) return "true, false";
  if (spec.type == ParameterType::Text) {
    std::string text;
    for (const std::string& choice : spec.choices) text += (text.empty() ? "" : ", ") + choice;
    return text;
  }
  const bool low = std::isfinite(spec.minimum), high = std::isfinite(spec.maximum);
  if (low && high) return fmt::format("{} .. {}", spec.minimum, spec.maximum);
  if (low) return fmt::format(">= {}", spec.minimum);
  if (high) return fmt::format("<= {}", spec.maximum);
  return "";
}

}  // namespace lrmoe
