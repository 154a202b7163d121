#include "core/system/thread_cpu_clock.hpp"

#include <time.h>

namespace lrmoe {
namespace {

thread_local double in_collectives = 0;  // seconds of this thread inside CollectiveCpuScopes
thread_local int open_scopes = 0;

}  // namespace

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double thread_work_cpu_seconds() {
  return thread_cpu_seconds() - in_collectives;
}

CollectiveCpuScope::CollectiveCpuScope(bool active) : active_(active) {
  if (active_ && open_scopes++ == 0) started_ = thread_cpu_seconds();
}

CollectiveCpuScope::~CollectiveCpuScope() {
  if (active_ && --open_scopes == 0) in_collectives += thread_cpu_seconds() - started_;
}

}  // namespace lrmoe
