#pragma once
// Heaps of their own for threads that stand for processes (Note [Replay] in docs/notes.md). A
// process has a heap of its own; threads share the C library's malloc arenas, glibc's default
// being 8 per core. Sixty-four threads planning on two cores then share 16, and their CPU time
// includes waiting on each other's arena locks and walking each other's free lists: costs no
// process pays, which a replay's planning seconds would report as the plan's.

#include <cstdint>

namespace lrmoe {

// Lets `threads` threads, beside those running anyway, each have a malloc arena of their own:
// call it before starting them. glibc fixes its arena limit once, when a thread first needs a new
// arena after the limit is set (or, unset, once it has made more than 8), so only the first call
// in a process counts; it never sets fewer arenas than glibc's default. No effect where the C
// library is not glibc, or once glibc has fixed its limit. Only the time changes, not what the
// threads compute.
void allow_own_heaps(int64_t threads);

}  // namespace lrmoe
