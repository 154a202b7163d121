#pragma once
// Numbers for people: as many decimals as `digits` significant digits need, so 0.000123 and
// 1234 both read at their precision (a fixed count of decimals prints the first as 0.0001).

#include <string>

namespace lrmoe {

// `value` with `digits` significant digits, no exponent; an integral value without decimals;
// infinities as "∞" and "-∞", NaN as "nan".
std::string significant_text(double value, int digits);

}  // namespace lrmoe
