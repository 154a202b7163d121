#include "core/system/thread_heaps.hpp"

#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace lrmoe {
namespace {

std::mutex mutex;
int64_t in_use = 0;  // threads of the OwnHeaps alive, on every thread
int64_t limit = 0;   // the arena limit set so far: arenas, once made, stay

// Arenas of the threads that were running anyway: the main thread's and the runtime's pools'.
constexpr int64_t kOthers = 16;

}  // namespace

OwnHeaps::OwnHeaps(int64_t threads) : threads_(threads) {
  const std::lock_guard<std::mutex> lock(mutex);
  in_use += threads_;
  if (in_use + kOthers <= limit) return;
  limit = in_use + kOthers;
#if defined(__GLIBC__)
  mallopt(M_ARENA_MAX, static_cast<int>(limit));
#endif
}

OwnHeaps::~OwnHeaps() {
  const std::lock_guard<std::mutex> lock(mutex);
  in_use -= threads_;
}

}  // namespace lrmoe
