#include "core/system/file_kind.hpp"

namespace lrmoe {

std::string not_a_regular_file(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  switch (fs::status(path, error).type()) {
    case fs::file_type::regular:
      return {};
    case fs::file_type::not_found:
      return "no such file";
    case fs::file_type::directory:
      return "a folder";
    case fs::file_type::fifo:
      return "a FIFO (named pipe)";
    case fs::file_type::socket:
      return "a socket";
    case fs::file_type::block:
    case fs::file_type::character:
      return "a device";
    default:
      return error ? error.message() : "not a regular file";
  }
}

}  // namespace lrmoe
