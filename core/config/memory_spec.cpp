#include "core/config/memory_spec.hpp"

#include <cmath>
#include <stdexcept>

#include "core/config/byte_size.hpp"

namespace lrmoe {

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
  return spec;
}

}  // namespace lrmoe
