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
  std::size_t digits = 0;
  while (digits < trimmed.size() && std::isdigit(static_cast<unsigned char>(trimmed[digits]))) {
    ++digits;
  }
  if (digits == 0) {
    throw std::invalid_argument("expected a whole number followed by a unit, e.g. \"64MiB\"; " +
                                std::string(kAcceptedUnits));
  }
  const std::string_view unit_name = trim_whitespace(trimmed.substr(digits));
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
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t count = 0;
  for (const char c : trimmed.substr(0, digits)) {
    const auto digit = static_cast<uint64_t>(c - '0');
    if (count > (kMax - digit) / 10) throw std::invalid_argument("the number is too large");
    count = count * 10 + digit;
  }
  if (count > kMax / unit_bytes) throw std::invalid_argument("the size is too large");
  return count * unit_bytes;
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
