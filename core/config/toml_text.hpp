#pragma once
// Values written as TOML text that reads back to the identical value: the resolved experiment,
// plugin parameters and hardware profiles are stored as TOML.

#include <string>

namespace lrmoe {

// The shortest text that reads back as the same double, always with a '.' or an exponent (or
// nan / inf) so that TOML reads it as a float again: `0.003`, `1000000.0`, `1e+20`.
std::string toml_float(double value);
// A basic "..." string with escapes only: one deterministic spelling, whatever the text holds.
std::string toml_string(const std::string& value);

}  // namespace lrmoe
