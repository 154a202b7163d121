#pragma once
// Ctrl-C (SIGINT) and SIGTERM ask a run to stop cleanly after the current step; a second Ctrl-C
// exits at once.

namespace lrmoe {

void install_interrupt_handler();
bool interrupt_requested();

}  // namespace lrmoe
