#pragma once
// A file's whole text, for tests that check what a command wrote.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace lrmoe_test {

// The bytes of `path` ("" when it cannot be read: the check that follows then fails on it).
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace lrmoe_test
