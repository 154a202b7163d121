#pragma once
// Checking a plugin file before dlopen maps it. dlopen trusts the file: a truncated library is
// mapped past its end and the first touch of a missing page kills the process with SIGBUS, and
// anything else in a plugin folder named *.so is parsed as ELF. Reading the headers first turns
// both into a PluginError naming the file (Note [Plugin boundary] in docs/notes.md).

#include <filesystem>

namespace lrmoe {

// Throws PluginError unless `path` is a regular file holding a 64-bit little-endian ELF shared
// object for this machine whose program and section headers, and every loaded segment, lie
// within the file.
void check_library_file(const std::filesystem::path& path);

}  // namespace lrmoe
