#pragma once
// Writing a file so that a crash or a full disk never leaves a partial file under its name: the
// bytes go to a temporary beside it, are flushed to the disk, and only then is it renamed. Used
// by checkpoints and by Hugging Face exports, whose files are gigabytes written in pieces.

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>

namespace lrmoe {

// Where a file's bytes go, in order (LibTorch's OutputArchive::save_to takes one). It always
// says it took them all: LibTorch's archive writer finishes the file in its destructor, and a
// short write there would end the process (std::terminate), so a failure is kept and thrown
// once the writer is done.
using ByteSink = std::function<std::size_t(const void* bytes, std::size_t size)>;

// The temporary `file` is written into: `file`.partial.
std::filesystem::path partial_path(const std::filesystem::path& file);

// Calls `write` with a sink into partial_path(`file`) (its folder created), flushes it to the
// disk, calls `before_rename` (if any) with the SHA-256 of the bytes, renames it to `file` and
// flushes the folder. Returns the SHA-256 (hex). Throws std::runtime_error naming the file and
// the cause (a full disk, a file-size limit); the temporary is removed and an older `file` is
// untouched.
std::string write_file_atomically(
    const std::filesystem::path& file, const std::function<void(const ByteSink& sink)>& write,
    const std::function<void(const std::string& sha256)>& before_rename = {});

// fsync of `path` opened with `flags` (O_RDONLY for a file, O_RDONLY | O_DIRECTORY for a
// folder); throws std::runtime_error naming it.
void sync_path(const std::filesystem::path& path, int flags);

}  // namespace lrmoe
