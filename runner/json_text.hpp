#pragma once
// JSON text for what lrmoe writes as JSON (compare --format json, compare --plot's spec).

#include <string>

namespace lrmoe {

// A JSON string literal: quotes, backslashes and control characters escaped.
std::string json_string(const std::string& text);

}  // namespace lrmoe
