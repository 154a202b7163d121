// The caching host allocator (Note [Host memory reuse]): freed large blocks are handed out again,
// small ones are freed at once, and the process never holds more than a quarter above
// its live tensors' peak.

#include <catch2/catch.hpp>

#include <c10/core/CPUAllocator.h>

#include <thread>
#include <vector>

#include "core/device/caching_host_allocator.hpp"

using namespace lrmoe;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

}  // namespace

TEST_CASE("a freed large block is handed out again for a request of its size class",
          "[allocator]") {
  CachingHostAllocator allocator;
  void* first = nullptr;
  {
    c10::DataPtr block = allocator.allocate(3 * kMiB);
    first = block.get();
    std::memset(first, 1, 3 * kMiB);  // the block is writable over all of its bytes
  }
  c10::DataPtr again = allocator.allocate(3 * kMiB - 100);  // the same size class
  CHECK(again.get() == first);
  const HostCacheStatistics stats = allocator.statistics();
  CHECK(stats.reused == 1);
  CHECK(stats.fresh == 1);
  CHECK(stats.cached_bytes == 0);
  CHECK(stats.live_bytes == static_cast<int64_t>(CachingHostAllocator::size_class(3 * kMiB)));
}

TEST_CASE("size classes are page multiples at most an eighth above the request", "[allocator]") {
  for (std::size_t bytes :
       {std::size_t{256} << 10, 3 * kMiB - 1, 32 * kMiB, 32 * kMiB + 1, std::size_t{1000000007}}) {
    const std::size_t size = CachingHostAllocator::size_class(bytes);
    INFO(bytes << " -> " << size);
    CHECK(size >= bytes);
    CHECK(size % 4096 == 0);
    CHECK(static_cast<double>(size) <= 1.125 * static_cast<double>(bytes) + 4096);
  }
}

TEST_CASE("small requests are freed at once, never cached", "[allocator]") {
  CachingHostAllocator allocator;
  { c10::DataPtr small = allocator.allocate(1000); }
  CHECK(allocator.statistics().fresh == 0);
  CHECK(allocator.statistics().cached_bytes == 0);
}

TEST_CASE("raw allocations of any size free through the raw deleter", "[allocator]") {
  // oneDNN's bf16 kernels allocate raw; LibTorch 1.13 asserted on a missing raw deleter.
  CachingHostAllocator allocator;
  for (const std::size_t bytes : {std::size_t{1000}, 3 * kMiB}) {
    void* block = allocator.raw_allocate(bytes);
    REQUIRE(block != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(block) % 64 == 0);
    std::memset(block, 1, bytes);
    allocator.raw_deallocate(block);
  }
  CHECK(allocator.statistics().live_bytes == 0);
  CHECK(allocator.statistics().cached_bytes ==
        static_cast<int64_t>(CachingHostAllocator::size_class(3 * kMiB)));
}

TEST_CASE("the cache never holds more than a quarter above the peak of live bytes", "[allocator]") {
  CachingHostAllocator allocator;
  {
    std::vector<c10::DataPtr> held;
    for (int i = 0; i < 4; ++i) held.push_back(allocator.allocate(4 * kMiB));
  }
  const int64_t peak = allocator.statistics().peak_live_bytes;
  REQUIRE(allocator.statistics().cached_bytes == peak);
  // A different size class at the same peak: cached blocks are freed to make room for it.
  std::vector<c10::DataPtr> other;
  for (int i = 0; i < 3; ++i) other.push_back(allocator.allocate(5 * kMiB));
  const HostCacheStatistics stats = allocator.statistics();
  CHECK(stats.live_bytes + stats.cached_bytes <=
        CachingHostAllocator::footprint_limit(stats.peak_live_bytes));
  CHECK(stats.cached_bytes < peak);
  CHECK(CachingHostAllocator::footprint_limit(peak) == peak + peak / 4);
}

TEST_CASE("passes whose blocks differ by a size class are served from the cache after the first",
          "[allocator]") {
  // A forward holding four 4 MiB blocks, a backward holding three of them and one of 3 MiB: held
  // to the peak itself, each pass would free the block the other asks for next.
  CachingHostAllocator allocator;
  for (int pass = 0; pass < 6; ++pass) {
    std::vector<c10::DataPtr> held;
    for (int i = 0; i < 3; ++i) held.push_back(allocator.allocate(4 * kMiB));
    held.push_back(allocator.allocate(pass % 2 == 0 ? 4 * kMiB : 3 * kMiB));
  }
  const HostCacheStatistics stats = allocator.statistics();
  CHECK(stats.fresh == 5);
  CHECK(stats.reused == 19);
}

TEST_CASE("tensors allocate and free through the cache from several threads", "[allocator]") {
  CachingHostAllocator allocator;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&allocator, t] {
      for (int i = 0; i < 50; ++i) {
        c10::DataPtr block = allocator.allocate((1 + (i + t) % 3) * kMiB);
        static_cast<char*>(block.get())[0] = static_cast<char>(i);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const HostCacheStatistics stats = allocator.statistics();
  CHECK(stats.live_bytes == 0);
  CHECK(stats.reused + stats.fresh == 200);
  CHECK(stats.cached_bytes <= CachingHostAllocator::footprint_limit(stats.peak_live_bytes));
}
