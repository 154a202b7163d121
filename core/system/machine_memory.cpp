#include "core/system/machine_memory.hpp"

#include <unistd.h>

#include <fstream>
#include <optional>

namespace lrmoe {
namespace {

// A cgroup limit file's number, or none where it is absent or says "max" (no limit). cgroup v1
// writes an unlimited limit as a number near 2^63, which the caller's minimum ignores.
std::optional<int64_t> read_limit(const char* path) {
  std::ifstream file(path);
  int64_t bytes = 0;
  if (!(file >> bytes) || bytes <= 0) return std::nullopt;
  return bytes;
}

}  // namespace

MemoryLimit host_memory_limit() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  MemoryLimit limit{static_cast<int64_t>(pages) * static_cast<int64_t>(page_size),
                    "physical memory"};
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const std::optional<int64_t> cgroup = read_limit(path);
    if (cgroup && *cgroup < limit.bytes)
      limit = {*cgroup, std::string("the cgroup limit in ") + path};
  }
  return limit;
}

}  // namespace lrmoe
