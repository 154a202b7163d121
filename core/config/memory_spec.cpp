#include "core/config/memory_spec.hpp"

#include <cmath>
#include <stdexcept>

#include "core/config/byte_size.hpp"

namespace lrmoe {

namespace {

// Bounds far above any machine's, so that the budget's arithmetic (bytes summed over a rank's
// holdings, in int64) cannot overflow: 1 PiB per rank, and a million times fixed ownership's need.
constexpr uint64_t kMostBytes = uint64_t{1} << 50;
constexpr double kMostTimesFixed = 1e6;

}  // namespace

MemorySpec parse_memory_spec(std::string_view text) {
  constexpr std::string_view kFixed = "x fixed";
  MemorySpec spec;
  if (text.size() > kFixed.size() && text.substr(text.size() - kFixed.size()) == kFixed) {
    const std::string number(text.substr(0, text.size() - kFixed.size()));
    std::size_t used = 0;
    double factor = 0;
    try {
      factor = std::stod(number, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != number.size() || !std::isfinite(factor) || factor <= 0) {
      throw std::invalid_argument(
          "\"" + std::string(text) +
          "\": a multiple of fixed ownership's need is a positive number then \"x fixed\", "
          "like \"0.8x fixed\"");
    }
    if (factor > kMostTimesFixed) {
      throw std::invalid_argument("\"" + std::string(text) +
                                  "\": a multiple of fixed ownership's need must be at most 1e6x");
    }
    spec.times_fixed = factor;
    return spec;
  }
  try {
    spec.bytes = parse_byte_size(text);
  } catch (const std::exception& error) {
    throw std::invalid_argument(std::string(error.what()) +
                                "; or a multiple of fixed ownership's need, like \"0.8x fixed\"");
  }
  if (spec.bytes == 0) throw std::invalid_argument("memory_per_rank must be more than 0 bytes");
  if (spec.bytes > kMostBytes) {
    throw std::invalid_argument(
        "\"" + std::string(text) +
        "\": memory_per_rank must be at most 1PiB (1125899906842624 bytes)");
  }
  return spec;
}

}  // namespace lrmoe
