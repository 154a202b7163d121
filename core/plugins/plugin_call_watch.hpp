#pragma once
// Which plugin call each thread is inside, kept where a signal handler and a watchdog thread can
// read it: a crash, an exit or a hang inside plugin code is then reported as that plugin's
// (Note [Plugin failures] in docs/notes.md). Marking a call costs a few atomic stores and a
// clock read; nothing is allocated.

#include <cstdint>
#include <string>

namespace lrmoe {

// Where in training a plugin is called; -1 where it is not in a step (loading, checkpoints).
struct PluginCallPlace {
  int64_t step = -1;
  int64_t layer = -1;
};

// A plugin call in progress, as find_plugin_call reports it.
struct ActivePluginCall {
  const char* label = nullptr;  // "the metric plugin 'gate' (/path/gate.so)"
  const char* call = nullptr;   // "score"
  PluginCallPlace place;
  int64_t started_ns = 0;  // on the monotonic clock (monotonic_nanoseconds)
};

// Marks this thread inside `call` of the plugin `label` names, from construction to destruction.
// `label` and `call` must outlive the scope (a PluginRecord's label, a string literal). Scopes
// nest: an inner one's end gives back the outer one.
class PluginCallScope {
 public:
  PluginCallScope(const std::string& label, const char* call, PluginCallPlace place);
  ~PluginCallScope();
  PluginCallScope(const PluginCallScope&) = delete;
  PluginCallScope& operator=(const PluginCallScope&) = delete;

 private:
  int slot_;
  ActivePluginCall outer_;  // the call this one is inside, or none (started_ns 0)
};

// The call in progress on this thread if there is one, else (unless `this_thread_only`) the one
// that has run longest on any thread: a crash on a thread of LibTorch's pool while a plugin runs
// is the plugin's. False when there is none. Async-signal-safe.
bool find_plugin_call(ActivePluginCall& found, bool this_thread_only = false);

// CLOCK_MONOTONIC in nanoseconds. Async-signal-safe.
int64_t monotonic_nanoseconds();

}  // namespace lrmoe
