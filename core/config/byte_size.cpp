#include "core/config/byte_size.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <limits>
#include <stdexcept>

#include "core/config/trim_whitespace.hpp"

namespace lrmoe {
namespace {

struct ByteUnit {
  std::string_view name;
  uint64_t bytes;
};

constexpr std::array<ByteUnit, 9> kUnits = {{
    {"B", 1},
    {"KiB", 1ull << 10},
    {"MiB", 1ull << 20},
    {"GiB", 1ull << 30},
    {"TiB", 1ull << 40},
    {"KB", 1000ull},
    {"MB", 1000ull * 1000},
    {"GB", 1000ull * 1000 * 1000},
    {"TB", 1000ull * 1000 * 1000 * 1000},
}};

constexpr std::string_view kAcceptedUnits =
    "accepted units: B, KiB, MiB, GiB, TiB (powers of 1024), KB, MB, GB, TB (powers of 1000)";

bool same_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

uint64_t parse_byte_size(std::string_view text) {
  const std::string_view trimmed = trim_whitespace(text);
  // The number: whole digits, then optionally a point and fraction digits ("1.5GiB").
  std::size_t end = 0;
  const auto skip_digits = [&] {
    const std::size_t start = end;
    while (end < trimmed.size() && std::isdigit(static_cast<unsigned char>(trimmed[end]))) ++end;
    return end - start;
  };
  const std::size_t whole_digits = skip_digits();
  std::size_t fraction_digits = 0;
  if (whole_digits > 0 && end < trimmed.size() && trimmed[end] == '.') {
    ++end;
    fraction_digits = skip_digits();
    if (fraction_digits == 0) --end;  // "1." is the number 1 followed by a unit "."
  }
  if (whole_digits == 0) {
    throw std::invalid_argument(
        "expected a number followed by a unit, e.g. \"64MiB\" or "
        "\"1.5GiB\"; " +
        std::string(kAcceptedUnits));
  }
  const std::string_view number = trimmed.substr(0, end);
  const std::string_view unit_name = trim_whitespace(trimmed.substr(end));
  uint64_t unit_bytes = 0;
  if (unit_name.empty()) {
    unit_bytes = 1;
  } else {
    for (const ByteUnit& unit : kUnits) {
      if (same_ignoring_case(unit_name, unit.name)) unit_bytes = unit.bytes;
    }
  }
  if (unit_bytes == 0) {
    throw std::invalid_argument("unknown unit '" + std::string(unit_name) + "'; " +
                                std::string(kAcceptedUnits));
  }
  // The number's digits without the point over 10^decimals, times the unit: its whole part
  // and its fraction apart, so that nothing overflows 64 bits (a fraction of at most 6 digits
  // times a unit of at most 2^40 bytes stays below 2^60).
  constexpr std::size_t kMostDecimals = 6;
  if (fraction_digits > kMostDecimals) {
    throw std::invalid_argument(
        fmt::format("{}: at most {} decimals; use a smaller unit", trimmed, kMostDecimals));
  }
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t digits = 0;
  uint64_t scale = 1;
  for (const char c : number) {
    if (c == '.') continue;
    const auto digit = static_cast<uint64_t>(c - '0');
    if (digits > (kMax - digit) / 10) throw std::invalid_argument("the number is too large");
    digits = digits * 10 + digit;
  }
  for (std::size_t i = 0; i < fraction_digits; ++i) scale *= 10;
  const uint64_t whole = digits / scale;
  const uint64_t fraction_bytes = digits % scale * unit_bytes;
  if (fraction_bytes % scale != 0) {
    throw std::invalid_argument(
        fmt::format("{} is not a whole number of bytes; use a smaller unit", trimmed));
  }
  if (whole > (kMax - fraction_bytes / scale) / unit_bytes)
    throw std::invalid_argument("the size is too large");
  return whole * unit_bytes + fraction_bytes / scale;
}

std::string format_byte_size(uint64_t bytes) {
  // The unit that divides the size exactly with the smallest count reads best: 80GiB, not
  // 81920MiB; 2GB, not 1953125KiB.
  const ByteUnit* best = &kUnits.front();
  for (const ByteUnit& unit : kUnits) {
    if (bytes >= unit.bytes && bytes % unit.bytes == 0 && unit.bytes > best->bytes) best = &unit;
  }
  return std::to_string(bytes / best->bytes) + std::string(best->name);
}

std::string readable_byte_size(double bytes) {
  constexpr double kKiB = 1024.0;
  if (bytes >= kKiB * kKiB * kKiB * kKiB)
    return fmt::format("{:.2f} TiB", bytes / (kKiB * kKiB * kKiB * kKiB));
  if (bytes >= kKiB * kKiB * kKiB) return fmt::format("{:.2f} GiB", bytes / (kKiB * kKiB * kKiB));
  if (bytes >= kKiB * kKiB) return fmt::format("{:.2f} MiB", bytes / (kKiB * kKiB));
  if (bytes >= kKiB) return fmt::format("{:.1f} KiB", bytes / kKiB);
  return fmt::format("{:.0f} B", bytes);
}

}  // namespace lrmoe
