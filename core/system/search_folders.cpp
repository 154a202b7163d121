#include "core/system/search_folders.hpp"

#include <algorithm>

namespace fs = std::filesystem;

namespace lrmoe {

fs::path folder_beside_executable(const std::vector<fs::path>& candidates) {
  std::error_code error;
  const fs::path executable = fs::read_symlink("/proc/self/exe", error);
  if (error) return {};
  for (const fs::path& candidate : candidates) {
    const fs::path folder = executable.parent_path() / candidate;
    if (fs::is_directory(folder, error)) return folder.lexically_normal();
  }
  return {};
}

void append_folder_list(std::vector<fs::path>& folders, const std::string& list) {
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t end = std::min(list.find(':', start), list.size());
    if (end > start) folders.emplace_back(list.substr(start, end - start));
    start = end + 1;
  }
}

}  // namespace lrmoe
