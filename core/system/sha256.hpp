#pragma once
// SHA-256 digests (OpenSSL), as lowercase hex: of resolved experiments, plugin libraries, data
// files and checkpoints.

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace lrmoe {

// A digest of bytes given in pieces: a file's as it is written, without reading it back.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void add(const void* bytes, std::size_t size);
  // The digest of everything added, as lowercase hex; the object is used up.
  std::string hex();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

std::string sha256_hex(std::string_view bytes);
// Of a file's bytes, read in chunks (a checkpoint may be larger than what memory can spare).
// Throws std::runtime_error naming the file when it cannot be read.
std::string sha256_file_hex(const std::filesystem::path& file);

}  // namespace lrmoe
