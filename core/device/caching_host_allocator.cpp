#include "core/device/caching_host_allocator.hpp"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace lrmoe {
namespace {

constexpr std::size_t kAlignment = 64;  // as LibTorch's own CPU allocator
constexpr std::size_t kPage = 4096;

}  // namespace

// Every block starts with a header, kAlignment bytes before the data handed out, so that the
// DataPtr's context is the data itself: c10::Allocator::raw_allocate requires it (oneDNN's bf16
// kernels allocate raw, and LibTorch 1.13 asserts), and raw_deallocate then reaches release()
// with the data pointer alone. The header says the block's size class and its allocator's state.
struct CachingHostAllocator::State {
  struct Header {
    std::size_t bytes;      // its size class; 0: a small block, freed at once, never cached
    std::size_t requested;  // what the tensor asked for
    std::shared_ptr<State> owner;
  };
  static_assert(sizeof(Header) <= kAlignment, "the header fits before the aligned data");

  static void* data_of(void* base) { return static_cast<char*>(base) + kAlignment; }
  static void* base_of(void* data) { return static_cast<char*>(data) - kAlignment; }

  std::mutex mutex;
  std::map<std::size_t, std::vector<void*>> free_blocks;  // block bases, by size class
  HostCacheStatistics stats;

  // The last owner is the allocator or the last block it handed out: the cache goes with it.
  ~State() {
    for (auto& size_class : free_blocks) {
      for (void* block : size_class.second) std::free(block);
    }
  }

  // Frees cached blocks, largest classes first, until live + cached fits under the footprint
  // limit: the cache never makes the process much larger than its live tensors once were.
  void trim_locked() {
    const int64_t limit = footprint_limit(stats.peak_live_bytes);
    while (stats.live_bytes + stats.cached_bytes > limit && !free_blocks.empty()) {
      auto largest = std::prev(free_blocks.end());
      std::free(largest->second.back());
      largest->second.pop_back();
      stats.cached_bytes -= static_cast<int64_t>(largest->first);
      if (largest->second.empty()) free_blocks.erase(largest);
    }
  }
};

CachingHostAllocator::CachingHostAllocator() : state_(std::make_shared<State>()) {}

int64_t CachingHostAllocator::footprint_limit(int64_t peak_live_bytes) {
  return peak_live_bytes + peak_live_bytes / 4;
}

std::size_t CachingHostAllocator::size_class(std::size_t bytes) {
  std::size_t octave = kPage;
  while (octave * 2 <= bytes) octave *= 2;
  const std::size_t step = std::max(kPage, octave / 8);
  return (bytes + step - 1) / step * step;
}

c10::DataPtr CachingHostAllocator::allocate(std::size_t bytes) LRMOE_ALLOCATE_CONST {
  // Small blocks are not cached (glibc keeps those itself) but carry the header too: a raw
  // deallocation cannot tell them apart otherwise.
  const bool cached = bytes >= kSmallest;
  const std::size_t size = cached ? size_class(bytes) : bytes;
  void* base = nullptr;
  if (cached) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    HostCacheStatistics& stats = state_->stats;
    auto reuse = state_->free_blocks.find(size);
    if (reuse != state_->free_blocks.end()) {
      base = reuse->second.back();
      reuse->second.pop_back();
      if (reuse->second.empty()) state_->free_blocks.erase(reuse);
      stats.cached_bytes -= static_cast<int64_t>(size);
      ++stats.reused;
    } else {
      ++stats.fresh;
    }
    stats.live_bytes += static_cast<int64_t>(size);
    stats.peak_live_bytes = std::max(stats.peak_live_bytes, stats.live_bytes);
    stats.requested_bytes += static_cast<int64_t>(bytes);
    stats.window_peak_requested_bytes =
        std::max(stats.window_peak_requested_bytes, stats.requested_bytes);
    if (!base) state_->trim_locked();
  }
  if (!base) {
    // aligned_alloc wants a multiple of the alignment.
    const std::size_t total = kAlignment + (size + kAlignment - 1) / kAlignment * kAlignment;
    base = std::aligned_alloc(kAlignment, total);
    if (!base) {
      if (cached) {
        std::lock_guard<std::mutex> lock(state_->mutex);
        state_->stats.live_bytes -= static_cast<int64_t>(size);
        state_->stats.requested_bytes -= static_cast<int64_t>(bytes);
      }
      TORCH_CHECK(false, "out of host memory allocating ", bytes, " bytes");
    }
  }
  // A small block needs no state to free: no shared_ptr copied for the many small tensors.
  new (base) State::Header{cached ? size : 0, bytes, cached ? state_ : nullptr};
  void* data = State::data_of(base);
  return {data, data, &CachingHostAllocator::release, c10::Device(c10::DeviceType::CPU)};
}

c10::DeleterFnPtr CachingHostAllocator::raw_deleter() const {
  return &CachingHostAllocator::release;
}

void CachingHostAllocator::release(void* data) {
  void* base = State::base_of(data);
  auto* header = static_cast<State::Header*>(base);
  const std::size_t bytes = header->bytes, requested = header->requested;
  std::shared_ptr<State> owner = std::move(header->owner);
  header->~Header();
  if (bytes == 0) {
    std::free(base);
    return;
  }
  std::lock_guard<std::mutex> lock(owner->mutex);
  owner->stats.live_bytes -= static_cast<int64_t>(bytes);
  owner->stats.requested_bytes -= static_cast<int64_t>(requested);
  owner->stats.cached_bytes += static_cast<int64_t>(bytes);
  owner->free_blocks[bytes].push_back(base);
}

#if LRMOE_ALLOCATOR_HAS_COPY_DATA
void CachingHostAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  default_copy_data(dest, src, count);
}
#endif

HostCacheStatistics CachingHostAllocator::statistics() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

int64_t CachingHostAllocator::take_peak_requested() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  HostCacheStatistics& stats = state_->stats;
  const int64_t peak = stats.window_peak_requested_bytes;
  stats.window_peak_requested_bytes = stats.requested_bytes;
  return peak;
}

namespace {

CachingHostAllocator* installed_allocator = nullptr;  // set once, never destroyed

}  // namespace

void install_caching_host_allocator() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    // Never destroyed: tensors freed during exit still reach it.
    installed_allocator = new CachingHostAllocator();
    // Above the priority LibTorch registers its own default with.
    c10::SetCPUAllocator(installed_allocator, /*priority=*/1);
  });
}

std::optional<int64_t> take_host_peak_requested() {
  if (!installed_allocator) return std::nullopt;
  return installed_allocator->take_peak_requested();
}

}  // namespace lrmoe
