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

// One block handed out: the DataPtr's context, so that the deleter knows its size class and
// its allocator's state without a lookup.
struct CachingHostAllocator::State {
  struct Block {
    void* data;
    std::size_t bytes;      // its size class
    std::size_t requested;  // what the tensor asked for
    std::shared_ptr<State> owner;
  };

  std::mutex mutex;
  std::map<std::size_t, std::vector<void*>> free_blocks;  // by size class
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

CachingHostAllocator::CachingHostAllocator(c10::Allocator* fallback)
    : fallback_(fallback), state_(std::make_shared<State>()) {}

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
  if (bytes < kSmallest) return fallback_->allocate(bytes);
  const std::size_t size = size_class(bytes);
  void* data = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    HostCacheStatistics& stats = state_->stats;
    auto cached = state_->free_blocks.find(size);
    if (cached != state_->free_blocks.end()) {
      data = cached->second.back();
      cached->second.pop_back();
      if (cached->second.empty()) state_->free_blocks.erase(cached);
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
    if (!data) state_->trim_locked();
  }
  if (!data) {
    data = std::aligned_alloc(kAlignment, size);
    if (!data) {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->stats.live_bytes -= static_cast<int64_t>(size);
      state_->stats.requested_bytes -= static_cast<int64_t>(bytes);
      TORCH_CHECK(false, "out of host memory allocating ", bytes, " bytes");
    }
  }
  auto* block = new State::Block{data, size, bytes, state_};
  return {data, block, &CachingHostAllocator::release, c10::Device(c10::DeviceType::CPU)};
}

void CachingHostAllocator::release(void* context) {
  std::unique_ptr<State::Block> block(static_cast<State::Block*>(context));
  State& state = *block->owner;
  std::lock_guard<std::mutex> lock(state.mutex);
  state.stats.live_bytes -= static_cast<int64_t>(block->bytes);
  state.stats.requested_bytes -= static_cast<int64_t>(block->requested);
  state.stats.cached_bytes += static_cast<int64_t>(block->bytes);
  state.free_blocks[block->bytes].push_back(block->data);
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
    installed_allocator = new CachingHostAllocator(c10::GetCPUAllocator());
    // Above the priority LibTorch registers its own default with.
    c10::SetCPUAllocator(installed_allocator, /*priority=*/1);
  });
}

std::optional<int64_t> take_host_peak_requested() {
  if (!installed_allocator) return std::nullopt;
  return installed_allocator->take_peak_requested();
}

}  // namespace lrmoe
