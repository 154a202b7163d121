#pragma once
// What kind of file a path names, for refusing early what cannot be read as a file: opening a
// FIFO for reading waits for a writer (forever, from a user's point of view), and a device or
// socket is no experiment, data or results file.

#include <filesystem>
#include <string>

namespace lrmoe {

// Empty when `path` is a regular file (after symbolic links); otherwise what it is instead: "no
// such file", "a folder", "a FIFO (named pipe)", "a socket", "a device", "not a regular file".
std::string not_a_regular_file(const std::filesystem::path& path);

}  // namespace lrmoe
