#include "core/system/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "core/system/sha256.hpp"

namespace lrmoe {
namespace {

namespace fs = std::filesystem;

// Writes what `write` gives its sink to the open file `fd`, and its SHA-256 to `digest`. The
// first failed write's errno is kept and returned; the sink still takes every byte.
int write_through_sink(int fd, Sha256& digest,
                       const std::function<void(const ByteSink& sink)>& write) {
  int failure = 0;
  write([&](const void* bytes, std::size_t size) -> std::size_t {
    digest.add(bytes, size);
    const char* next = static_cast<const char*>(bytes);
    for (std::size_t left = size; left > 0 && failure == 0;) {
      const ssize_t written = ::write(fd, next, left);
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) {
        failure = written < 0 ? errno : EIO;
        break;
      }
      next += written;
      left -= static_cast<std::size_t>(written);
    }
    return size;
  });
  return failure;
}

}  // namespace

fs::path partial_path(const fs::path& file) {
  return file.parent_path() / (file.filename().string() + ".partial");
}

void sync_path(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) throw std::runtime_error(fmt::format("{}: {}", path.string(), std::strerror(errno)));
  const int synced = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (synced != 0)
    throw std::runtime_error(fmt::format("{}: {}", path.string(), std::strerror(saved)));
}

std::string write_file_atomically(const fs::path& file,
                                  const std::function<void(const ByteSink& sink)>& write,
                                  const std::function<void(const std::string&)>& before_rename) {
  const fs::path temporary = partial_path(file);
  int fd = -1;
  try {
    if (!file.parent_path().empty()) fs::create_directories(file.parent_path());
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      throw std::runtime_error(fmt::format("{}: {}", temporary.string(), std::strerror(errno)));
    Sha256 digest;
    int failure = write_through_sink(fd, digest, write);
    if (failure == 0 && ::fsync(fd) != 0) failure = errno;
    if (::close(fd) != 0 && failure == 0) failure = errno;
    fd = -1;
    if (failure != 0)
      throw std::runtime_error(fmt::format("{}: {}", temporary.string(), std::strerror(failure)));
    const std::string sha256 = digest.hex();
    if (before_rename) before_rename(sha256);
    fs::rename(temporary, file);
    // The rename itself reaches the disk.
    sync_path(file.parent_path().empty() ? fs::path(".") : file.parent_path(),
              O_RDONLY | O_DIRECTORY);
    return sha256;
  } catch (...) {
    if (fd >= 0) ::close(fd);
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw;
  }
}

}  // namespace lrmoe
