#pragma once
// LibTorch's CPU tensors of 256 KiB and more, kept for reuse when freed instead of going back to
// the C library (Note [Host memory reuse] in docs/notes.md). glibc serves them with mmap and
// unmaps them when freed, so every pass of a training step touched its large buffers afresh:
// 57 thousand page faults a pass of bench-pipeline's MoE layer, the kernel zeroing each page.
// Freed blocks are cached by size class and handed out again; the process never holds more
// than a quarter above the peak of what its live tensors needed.

#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/system/libtorch_compat.hpp"

namespace lrmoe {

struct HostCacheStatistics {
  int64_t live_bytes = 0;    // handed out and not freed, in size classes
  int64_t cached_bytes = 0;  // freed and kept for reuse
  int64_t peak_live_bytes = 0;
  int64_t reused = 0;  // allocations served from the cache
  int64_t fresh = 0;   // allocations that asked the C library
  // The bytes the live blocks were asked for (the tensors' own sizes), and their peak since
  // take_peak_requested last ran: what a step's measured memory reads (Note [Memory model]).
  int64_t requested_bytes = 0;
  int64_t window_peak_requested_bytes = 0;
};

class CachingHostAllocator final : public c10::Allocator {
 public:
  // Below this size a block is freed at once, not cached (glibc keeps small blocks itself).
  static constexpr std::size_t kSmallest = std::size_t{256} << 10;

  CachingHostAllocator();

  c10::DataPtr allocate(std::size_t bytes) LRMOE_ALLOCATE_CONST override;
  // Blocks can be freed from their data pointer alone (raw_allocate / raw_deallocate).
  c10::DeleterFnPtr raw_deleter() const override;
#if LRMOE_ALLOCATOR_HAS_COPY_DATA
  void copy_data(void* dest, const void* src, std::size_t count) const override;
#endif
  HostCacheStatistics statistics() const;
  // The peak of requested_bytes since the last call (or since the allocator was made), and
  // starts the next window at the bytes live now.
  int64_t take_peak_requested();

  // The most bytes live and cached blocks may come to: a quarter above the peak of live bytes.
  // At the peak itself, a pass whose size classes differ from the last pass's by a block or two
  // (a backward's from its forward's) frees the blocks the next pass asks for again: 9 fresh
  // blocks a pass of bench-pipeline's layer, none with the quarter.
  static int64_t footprint_limit(int64_t peak_live_bytes);

  // The size class a request of `bytes` is served from: 8 classes per power of two, each a
  // multiple of 4 KiB, so that a block is at most 12.5% larger than asked.
  static std::size_t size_class(std::size_t bytes);

 private:
  struct State;
  static void release(void* context);  // the DataPtr's deleter; context is the State's block

  c10::Allocator* fallback_;
  std::shared_ptr<State> state_;
};

// Makes a CachingHostAllocator LibTorch's CPU allocator for the rest of the process (once; later
// calls do nothing). The `lrmoe` program calls it at start; the tests use LibTorch's own.
void install_caching_host_allocator();

// The installed allocator's take_peak_requested; none when none was installed.
std::optional<int64_t> take_host_peak_requested();

}  // namespace lrmoe
