#include "core/train/checkpoint.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace lrmoe {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "step-";
constexpr const char* kSuffix = ".pt";

// The step of a checkpoint file name, none for any other file.
std::optional<int64_t> step_of(const fs::path& file) {
  const std::string name = file.filename().string();
  const std::string prefix = kPrefix, suffix = kSuffix;
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return std::nullopt;
  }
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(digits);
}

// Every checkpoint of `folder`, oldest first.
std::vector<std::pair<int64_t, fs::path>> checkpoints(const fs::path& folder) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    if (const auto step = step_of(entry.path()); step && entry.is_regular_file())
      found.emplace_back(*step, entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

void sync_path(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) throw CheckpointError(fmt::format("{}: {}", path.string(), std::strerror(errno)));
  const int synced = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (synced != 0)
    throw CheckpointError(fmt::format("{}: {}", path.string(), std::strerror(saved)));
}

}  // namespace

fs::path checkpoint_path(const fs::path& folder, int64_t step) {
  return folder / fmt::format("{}{:08d}{}", kPrefix, step, kSuffix);
}

std::optional<fs::path> latest_checkpoint(const fs::path& folder) {
  const auto found = checkpoints(folder);
  if (found.empty()) return std::nullopt;
  return found.back().second;
}

void write_atomically(const fs::path& file,
                      const std::function<void(const std::string& temporary)>& write) {
  const fs::path folder = file.parent_path();
  const fs::path temporary = folder / (file.filename().string() + ".partial");
  try {
    fs::create_directories(folder);
    write(temporary.string());
    sync_path(temporary, O_RDONLY);
    fs::rename(temporary, file);
    sync_path(folder, O_RDONLY | O_DIRECTORY);  // the rename itself reaches the disk
  } catch (const std::exception& error) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw CheckpointError(fmt::format(
        "cannot write checkpoint {}: {}; check that the folder is writable and has room, or set "
        "train.checkpoint_every = 0",
        file.string(), error.what()));
  }
}

void prune_checkpoints(const fs::path& folder, int64_t keep) {
  const auto found = checkpoints(folder);
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < found.size(); ++i) {
    std::error_code ignored;
    fs::remove(found[i].second, ignored);
  }
}

void check_checkpoint_identity(const fs::path& file, const CheckpointIdentity& found,
                               const CheckpointIdentity& expected) {
  if (found.experiment_sha256 != expected.experiment_sha256) {
    throw CheckpointError(fmt::format(
        "{}: this checkpoint is of another experiment (sha256 {}, the run's is {}); a run "
        "resumes only from its own checkpoints",
        file.string(), found.experiment_sha256, expected.experiment_sha256));
  }
  if (found.code_version != expected.code_version) {
    throw CheckpointError(fmt::format(
        "{}: this checkpoint was written by lrmoe {}, this is {}; resume it with the build that "
        "wrote it (a resumed run must train as the uninterrupted one would)",
        file.string(), found.code_version, expected.code_version));
  }
}

}  // namespace lrmoe
