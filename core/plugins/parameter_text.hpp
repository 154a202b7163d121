#pragma once
// How a plugin parameter's declaration reads in messages and listings.

#include <string>

#include "lrmoe/parameters.hpp"

namespace lrmoe {

// "integer", "number", "bool", "string".
std::string parameter_type_name(ParameterType type);

// The allowed values: "0 .. 1", ">= 0", "true, false", "a, b"; "" when anything goes.
std::string parameter_allowed_text(const ParameterSpec& spec);

}  // namespace lrmoe
