#pragma once
// Ctrl-C (SIGINT) and SIGTERM ask a command to stop cleanly (a run after the current step, a
// query where it is); a second Ctrl-C exits at once.

namespace lrmoe {

inline constexpr const char* kStopAfterStep =
    "\nlrmoe: stopping after this step (Ctrl-C again to quit at once)\n";

// `notice` is printed on the first signal, as the line that says what stopping means ("stopping
// after this step ..."), or nothing when null: a command whose stop ends in its own one line
// says nothing more.
void install_interrupt_handler(const char* notice = kStopAfterStep);
bool interrupt_requested();
// The signal that asked to stop (SIGINT or SIGTERM); 0 before one has.
int interrupt_signal();

}  // namespace lrmoe
