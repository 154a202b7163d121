#include "core/data/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/data/token_source.hpp"

namespace lrmoe {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const char* action, int error) {
  throw DataError("cannot " + std::string(action) + " '" + path.string() +
                  "': " + std::strerror(error) +
                  ": check that it is a readable regular file (permissions, mount)");
}

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; it is refused below.
  const int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (descriptor < 0) fail(path, "open", errno);
  struct stat status {};
  if (::fstat(descriptor, &status) != 0) {
    const int error = errno;
    ::close(descriptor);
    fail(path, "inspect", error);
  }
  if (!S_ISREG(status.st_mode)) {
    ::close(descriptor);
    throw DataError("cannot read '" + path.string() +
                    "': not a regular file (a FIFO, device or folder); name the file itself");
  }
  size_ = static_cast<size_t>(status.st_size);
  if (size_ > 0) {
    void* mapping = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, descriptor, 0);
    if (mapping == MAP_FAILED) {
      const int error = errno;
      ::close(descriptor);
      fail(path, "map", error);
    }
    data_ = static_cast<const unsigned char*>(mapping);
  }
  // The mapping keeps the file's pages reachable; the descriptor is no longer needed.
  ::close(descriptor);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
}

}  // namespace lrmoe
