#pragma once
// A read-only memory map of a whole file: token files and safetensors shards can be many
// gigabytes, and a map lets the kernel page in only the windows (tensors) that are read.

#include <cstddef>
#include <filesystem>

namespace lrmoe {

class MappedFile {
 public:
  // Throws DataError naming the file when it cannot be opened or mapped. An empty file maps to
  // size() == 0 and data() == nullptr.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace lrmoe
