#include "core/system/one_line.hpp"

namespace lrmoe {

std::string one_line(std::string_view text) {
  std::string line;
  line.reserve(text.size());
  for (const char c : text) {
    if (c == '\n') {
      line += "↵";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      line += ' ';
    } else {
      line += c;
    }
  }
  return line;
}

}  // namespace lrmoe
