#pragma once
// A plugin that crashes (a fatal signal, abort), ends the process (exit) or hangs inside a call
// cannot take the runner down silently: the process prints one line naming the plugin, its
// library, the call and where, and records its run failed with that line as an event before it
// ends (Note [Plugin failures] in docs/notes.md).

#include <cstdint>
#include <string>

namespace lrmoe {

// Installs the reports for this process: handlers for the fatal signals (on an alternate stack,
// so that a stack overflow is reported too), for exit() and quick_exit(), and a watchdog thread
// that ends the process when one plugin call has run `call_timeout_seconds`. `where` (the
// experiment file) begins the line. Called again, it only changes `where` and the timeout.
void watch_plugin_failures(const std::string& where, double call_timeout_seconds);

// From now on a failure is also recorded: run `run` of `database` gets the line as an error
// event and the status 'failed' (by `lrmoe record-plugin-failure`, a fresh process, since the
// failing one may have a corrupt heap), unless it has ended already. Every process of a run
// records its own failure. Without it, the line is printed only.
void record_plugin_failures_in(const std::string& database, int64_t run);

}  // namespace lrmoe
