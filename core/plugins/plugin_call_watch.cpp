#include "core/plugins/plugin_call_watch.hpp"

#include <time.h>

#include <atomic>

namespace lrmoe {
namespace {

// Release stores and acquire loads: plain moves on x86, where sequentially consistent stores (a
// locked exchange each) made marking a call cost 87 ns instead of 25 (most of it the clock read).
constexpr std::memory_order kPublish = std::memory_order_release;
constexpr std::memory_order kRead = std::memory_order_acquire;

// One thread's call in progress. Lock-free atomics, so that a signal handler on any thread and
// the watchdog read them without locks; started_ns is written last on entry and first on exit,
// and 0 means no call.
struct CallSlot {
  std::atomic<bool> taken{false};
  std::atomic<const char*> label{nullptr};
  std::atomic<const char*> call{nullptr};
  std::atomic<int64_t> step{-1};
  std::atomic<int64_t> layer{-1};
  std::atomic<int64_t> started_ns{0};
};

// More threads than any command calls plugins from (a projection's --jobs); a thread beyond them
// is not watched, which loses only the report.
constexpr int kSlots = 256;
CallSlot slots[kSlots];

// This thread's slot, claimed on its first plugin call and given back when the thread ends.
class ThreadSlot {
 public:
  ThreadSlot() {
    for (int i = 0; i < kSlots; ++i) {
      bool expected = false;
      if (slots[i].taken.compare_exchange_strong(expected, true)) {
        index_ = i;
        return;
      }
    }
  }
  // A thread ends inside a plugin call only when plugin code calls exit(), which destroys the
  // thread's objects before the exit handlers run: the call stays marked for them to report.
  ~ThreadSlot() {
    if (index_ >= 0 && slots[index_].started_ns.load(kRead) == 0)
      slots[index_].taken.store(false, kPublish);
  }
  int index() const { return index_; }

 private:
  int index_ = -1;
};

int this_thread_slot() {
  thread_local ThreadSlot slot;
  return slot.index();
}

// The slot of this thread as a signal handler may read it: a thread_local of trivial type, set
// once by this_thread_slot's caller, so reading it runs no initialiser.
thread_local int signal_safe_slot = -1;

// Writes `call` into `slot`: started_ns last, so that a reader that finds it set finds the rest
// of this call; 0 there first, so that no reader takes the old start for the new call.
void publish(CallSlot& slot, const ActivePluginCall& call) {
  slot.started_ns.store(0, kPublish);
  slot.label.store(call.label, kPublish);
  slot.call.store(call.call, kPublish);
  slot.step.store(call.place.step, kPublish);
  slot.layer.store(call.place.layer, kPublish);
  slot.started_ns.store(call.started_ns, kPublish);
}

ActivePluginCall read(const CallSlot& slot, int64_t started_ns) {
  ActivePluginCall found;
  found.label = slot.label.load(kRead);
  found.call = slot.call.load(kRead);
  found.place = {slot.step.load(kRead), slot.layer.load(kRead)};
  found.started_ns = started_ns;
  return found;
}

}  // namespace

int64_t monotonic_nanoseconds() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

PluginCallScope::PluginCallScope(const std::string& label, const char* call, PluginCallPlace place)
    : slot_(this_thread_slot()) {
  if (slot_ < 0) return;
  signal_safe_slot = slot_;
  CallSlot& s = slots[slot_];
  outer_ = read(s, s.started_ns.load(kRead));
  publish(s, {label.c_str(), call, place, monotonic_nanoseconds()});
}

PluginCallScope::~PluginCallScope() {
  if (slot_ >= 0) publish(slots[slot_], outer_);
}

bool find_plugin_call(ActivePluginCall& found, bool this_thread_only) {
  if (signal_safe_slot >= 0) {
    const int64_t started = slots[signal_safe_slot].started_ns.load(kRead);
    if (started != 0) {
      found = read(slots[signal_safe_slot], started);
      return true;
    }
  }
  if (this_thread_only) return false;
  bool any = false;
  for (const CallSlot& slot : slots) {
    const int64_t started = slot.started_ns.load(kRead);
    if (started == 0 || (any && started >= found.started_ns)) continue;
    found = read(slot, started);
    any = true;
  }
  return any;
}

}  // namespace lrmoe
