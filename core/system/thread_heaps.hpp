#pragma once
// Heaps of their own for threads that stand for processes (Note [Replay] in docs/notes.md). A
// process has a heap of its own; threads share the C library's malloc arenas, glibc's default
// being 8 per core. Sixty-four threads planning on two cores then share 16 arenas, and their
// CPU time includes waiting on each other's arena locks and walking each other's free lists:
// costs no process pays, which a replay's planning seconds would report as the plan's.

#include <cstdint>

namespace lrmoe {

// While it lives, `threads` more threads, beyond the others running, may each have a malloc
// arena of its own. No effect where the C library is not glibc, or once glibc has fixed its
// arena limit (at its ninth arena, unless a limit was set before); either way only the time
// changes, not what the threads compute.
class OwnHeaps {
 public:
  explicit OwnHeaps(int64_t threads);
  ~OwnHeaps();
  OwnHeaps(const OwnHeaps&) = delete;
  OwnHeaps& operator=(const OwnHeaps&) = delete;

 private:
  int64_t threads_;
};

}  // namespace lrmoe
