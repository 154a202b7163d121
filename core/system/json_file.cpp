#include "core/system/json_file.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace lrmoe {

nlohmann::json read_json_file(const std::filesystem::path& file, std::uintmax_t most_bytes) {
  std::error_code ec;
  // file_size refuses what is not a regular file before anything opens it.
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec) throw JsonFileError(fmt::format("cannot read it ({})", ec.message()));
  if (size > most_bytes)
    throw JsonFileError(fmt::format("{} bytes, more than {}", size, most_bytes));
  std::ifstream in(file, std::ios::binary);
  if (!in) throw JsonFileError(fmt::format("cannot open it ({})", std::strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {  // syntax, or a number past a double (406)
    throw JsonFileError(fmt::format("not valid JSON ({})", e.what()));
  }
}

}  // namespace lrmoe
