#include "core/system/thread_heaps.hpp"

#include <algorithm>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#include <sys/sysinfo.h>
#endif

namespace lrmoe {

void allow_own_heaps(int64_t threads) {
#if defined(__GLIBC__)
  // Arenas of the threads running anyway: the main thread's and the runtime's pools'.
  constexpr int64_t kOthers = 16;
  static std::once_flag once;
  std::call_once(once, [threads] {
    const int64_t glibc_default = 8 * static_cast<int64_t>(std::max(get_nprocs(), 1));
    mallopt(M_ARENA_MAX, static_cast<int>(std::max(threads + kOthers, glibc_default)));
  });
#else
  (void)threads;
#endif
}

}  // namespace lrmoe
