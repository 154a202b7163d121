#pragma once
// Reading a hardware profile file (internal to core/cost): parsing its TOML and checking every
// key as hardware_profile.hpp describes, and the spellings that reading and to_toml share.
// hardware_profile.cpp finds the file by name or path and reads it with read_profile.

#include <filesystem>
#include <string>
#include <vector>

#include "core/cost/hardware_profile.hpp"

namespace lrmoe::profile_file {

// The profile in the file at `path`, every key checked; its `name` must equal the file's stem.
// Throws std::invalid_argument (through `fail`) naming the file, the place and the key.
HardwareProfile read_profile(const std::filesystem::path& path);

// Throws std::invalid_argument with `message` on one line.
[[noreturn]] void fail(const std::string& message);

// The rows of a GEMM efficiency point as TOML text.
std::string format_rows(double rows);

// " (did you mean 'x'?)" when one of `candidates` is a likely typo of `word`, otherwise "".
std::string suggestion(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace lrmoe::profile_file
