#include "runner/duration_text.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace lrmoe {

std::string duration_text(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

}  // namespace lrmoe
