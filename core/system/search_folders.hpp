#pragma once
// Where the runner looks for its data (plugins, hardware profiles): folders found relative to
// the running executable, whether it runs from a build tree or an installation, and
// ':'-separated folder lists from the environment or an experiment.

#include <filesystem>
#include <string>
#include <vector>

namespace lrmoe {

// The first of `candidates` (paths relative to the executable's folder) that is a folder;
// empty when none is, or the executable cannot be found.
std::filesystem::path folder_beside_executable(
    const std::vector<std::filesystem::path>& candidates);

// Appends the non-empty entries of the ':'-separated `list`.
void append_folder_list(std::vector<std::filesystem::path>& folders, const std::string& list);

}  // namespace lrmoe
