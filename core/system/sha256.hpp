#pragma once
// SHA-256 digests (OpenSSL), as lowercase hex: of resolved experiments, plugin libraries, data
// files and checkpoints.

#include <filesystem>
#include <string>
#include <string_view>

namespace lrmoe {

std::string sha256_hex(std::string_view bytes);
// Of a file's bytes, read in chunks (a checkpoint may be larger than what memory can spare).
// Throws std::runtime_error naming the file when it cannot be read.
std::string sha256_file_hex(const std::filesystem::path& file);

}  // namespace lrmoe
