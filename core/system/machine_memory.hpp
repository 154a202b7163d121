#pragma once
// How much memory this machine lets a process tree use: the physical memory, or the control
// group's limit where that is lower (a container's), so that a run too large for it is refused
// before it allocates.

#include <cstdint>
#include <string>

namespace lrmoe {

struct MemoryLimit {
  int64_t bytes = 0;
  std::string what;  // "physical memory" or "the cgroup limit in /sys/fs/cgroup/memory.max"
};

MemoryLimit host_memory_limit();

}  // namespace lrmoe
