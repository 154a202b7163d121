#include "core/train/checkpoint.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <vector>

#include "core/system/atomic_file.hpp"
#include "core/system/sha256.hpp"

namespace lrmoe {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "step-";
constexpr const char* kSuffix = ".pt";
// Beside each file of a checkpoint: its SHA-256, as sha256sum writes it ("HEX  NAME").
constexpr const char* kChecksumSuffix = ".sha256";

constexpr const char* kPart = ".process-";

bool all_digits(const std::string& text) {
  return !text.empty() && text.size() <= 18 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A file of a checkpoint: its step, and the process for a part (none for the main file).
struct CheckpointFile {
  int64_t step = 0;
  std::optional<int64_t> process;
  fs::path path;
};

// What a file name says it is: a checkpoint's main file or part, or none for any other file.
std::optional<CheckpointFile> parse_checkpoint_name(const fs::path& file) {
  const std::string name = file.filename().string();
  const std::string prefix = kPrefix, suffix = kSuffix;
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return std::nullopt;
  }
  std::string stem = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  CheckpointFile parsed{0, std::nullopt, file};
  if (const std::size_t part = stem.find(kPart); part != std::string::npos) {
    const std::string process = stem.substr(part + std::strlen(kPart));
    if (!all_digits(process)) return std::nullopt;
    parsed.process = std::stoll(process);
    stem.resize(part);
  }
  if (!all_digits(stem)) return std::nullopt;
  parsed.step = std::stoll(stem);
  return parsed;
}

// Every main file (`parts` false) or every part (true) of `folder`, oldest first; none when the
// folder does not exist. Throws CheckpointError when it exists but cannot be listed (a symlink
// loop, no permission): "no checkpoint" would then send the user looking in the wrong place.
std::vector<CheckpointFile> checkpoint_files(const fs::path& folder, bool parts) {
  std::vector<CheckpointFile> found;
  std::error_code error;
  fs::directory_iterator entries(folder, error);
  if (error && error != std::errc::no_such_file_or_directory) {
    throw CheckpointError(fmt::format(
        "{}: cannot list the run's checkpoints ({}); make it a folder this user can read",
        folder.string(), error.message()));
  }
  for (const fs::directory_entry& entry : entries) {
    const auto parsed = parse_checkpoint_name(entry.path());
    std::error_code kind;
    if (parsed && parsed->process.has_value() == parts && entry.is_regular_file(kind))
      found.push_back(*parsed);
  }
  std::sort(found.begin(), found.end(), [](const CheckpointFile& a, const CheckpointFile& b) {
    return a.step < b.step || (a.step == b.step && a.process < b.process);
  });
  return found;
}

}  // namespace

fs::path checkpoint_path(const fs::path& folder, int64_t step) {
  return folder / fmt::format("{}{:08d}{}", kPrefix, step, kSuffix);
}

fs::path checkpoint_part_path(const fs::path& folder, int64_t step, int64_t process) {
  return folder / fmt::format("{}{:08d}{}{}{}", kPrefix, step, kPart, process, kSuffix);
}

std::optional<fs::path> latest_checkpoint(const fs::path& folder) {
  const auto found = checkpoint_files(folder, /*parts=*/false);
  if (found.empty()) return std::nullopt;
  return found.back().path;
}

namespace {

fs::path checksum_path(const fs::path& file) {
  return fs::path(file.string() + kChecksumSuffix);
}

void write_text_file(const fs::path& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
  out.close();  // flushes: a full disk shows here
  if (!out) throw std::runtime_error(fmt::format("{}: {}", file.string(), std::strerror(errno)));
}

}  // namespace

void write_atomically(const fs::path& file,
                      const std::function<void(const ByteSink& sink)>& write) {
  const fs::path checksum = checksum_path(file);
  const fs::path checksum_temporary = partial_path(checksum);
  try {
    // The checksum is renamed into place first: a checkpoint is never without it.
    write_file_atomically(file, write, [&](const std::string& sha256) {
      write_text_file(checksum_temporary,
                      fmt::format("{}  {}\n", sha256, file.filename().string()));
      sync_path(checksum_temporary, O_RDONLY);
      fs::rename(checksum_temporary, checksum);
    });
  } catch (const std::exception& error) {
    std::error_code ignored;
    fs::remove(checksum_temporary, ignored);
    throw CheckpointError(fmt::format(
        "cannot write checkpoint {}: {}; check that the folder is writable and has room (and "
        "the file-size limit, ulimit -f), or set train.checkpoint_every = 0",
        file.string(), error.what()));
  }
}

void prune_checkpoints(const fs::path& folder, int64_t keep) {
  const auto found = checkpoint_files(folder, /*parts=*/false);
  std::set<int64_t> kept;
  std::error_code ignored;
  auto remove = [&](const fs::path& file) {
    fs::remove(file, ignored);
    fs::remove(checksum_path(file), ignored);
  };
  for (std::size_t i = 0; i < found.size(); ++i) {
    if (i + static_cast<std::size_t>(keep) < found.size())
      remove(found[i].path);
    else
      kept.insert(found[i].step);
  }
  for (const CheckpointFile& part : checkpoint_files(folder, /*parts=*/true))
    if (kept.count(part.step) == 0) remove(part.path);
  // What a process killed mid-write left (a failed write removes its own): never a checkpoint.
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, ignored)) {
    if (entry.path().extension() == ".partial") fs::remove(entry.path(), ignored);
  }
}

namespace {

// What is wrong with `file` against the checksum written with it, "{file}: damaged: ...", or
// nothing when it verifies.
std::optional<std::string> checksum_problem(const fs::path& file) {
  std::ifstream in(checksum_path(file));
  std::string recorded;
  if (!(in >> recorded)) {
    return fmt::format(
        "{}: has no readable checksum ({}) beside it, which every checkpoint is written with",
        file.string(), checksum_path(file).filename().string());
  }
  std::string now;
  try {
    now = sha256_file_hex(file);
  } catch (const std::runtime_error& error) {
    return fmt::format("{}: {}", file.string(), error.what());
  }
  if (now != recorded) {
    return fmt::format("{}: damaged: its SHA-256 is {}..., not the {}... written with it",
                       file.string(), now.substr(0, 12), recorded.substr(0, 12));
  }
  return std::nullopt;
}

}  // namespace

void verify_checkpoint_file(const fs::path& file) {
  if (const std::optional<std::string> problem = checksum_problem(file)) {
    throw CheckpointError(*problem +
                          "; resume from an earlier checkpoint by removing this one (lrmoe resume "
                          "skips it on its own)");
  }
}

std::optional<fs::path> latest_verified_checkpoint(const fs::path& folder,
                                                   std::vector<std::string>& skipped) {
  const auto found = checkpoint_files(folder, /*parts=*/false);
  const auto parts = checkpoint_files(folder, /*parts=*/true);
  for (auto main = found.rbegin(); main != found.rend(); ++main) {
    std::optional<std::string> problem = checksum_problem(main->path);
    for (const CheckpointFile& part : parts) {
      if (!problem && part.step == main->step) problem = checksum_problem(part.path);
    }
    if (!problem) return main->path;
    skipped.push_back(*problem);
  }
  return std::nullopt;
}

void check_checkpoint_identity(const fs::path& file, const CheckpointIdentity& found,
                               const CheckpointIdentity& expected) {
  if (!expected.experiment_sha256.empty() &&
      found.experiment_sha256 != expected.experiment_sha256) {
    throw CheckpointError(fmt::format(
        "{}: this checkpoint is of another experiment (sha256 {}, the run's is {}); a run "
        "resumes only from its own checkpoints",
        file.string(), found.experiment_sha256, expected.experiment_sha256));
  }
  if (!expected.code_version.empty() && found.code_version != expected.code_version) {
    throw CheckpointError(fmt::format(
        "{}: this checkpoint was written by lrmoe {}, this is {}; resume it with the build that "
        "wrote it (a resumed run must train as the uninterrupted one would)",
        file.string(), found.code_version, expected.code_version));
  }
}

}  // namespace lrmoe
