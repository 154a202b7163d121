#include "runner/count_option.hpp"

#include <fmt/format.h>

#include <charconv>
#include <string>

namespace lrmoe {

CLI::Validator count_between(int64_t low, int64_t high) {
  const std::string range = high == std::numeric_limits<int64_t>::max()
                                ? fmt::format("a whole number of at least {}", low)
                                : fmt::format("a whole number from {} to {}", low, high);
  return CLI::Validator(
      [low, high, range](std::string& text) -> std::string {
        int64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [stop, error] = std::from_chars(text.data(), end, value);
        if (error == std::errc::result_out_of_range && stop == end) {
          if (text.front() == '-')
            return fmt::format("'{}' is too small: the least is {}", text, low);
          return fmt::format("'{}' is too large: the most is {}", text, high);
        }
        if (text.empty() || error != std::errc() || stop != end || value < low || value > high)
          return fmt::format("'{}' is not {}", text, range);
        return "";
      },
      range);
}

}  // namespace lrmoe
