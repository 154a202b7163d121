#pragma once
// Who is writing a run (host name, process id and the process's start), and whether a recorded
// process still exists on this host: the facts behind marking abandoned runs 'interrupted'.

#include <cstdint>
#include <string>

namespace lrmoe::store {

std::string this_host_name();
int64_t this_process_id();

// What tells process `pid` apart from a later process the kernel gives the same id: the boot and
// the process's start time, "BOOT_ID/START_TICKS" (/proc). Empty when it cannot be read (no such
// process, no /proc).
std::string process_start_mark(int64_t pid);

// Whether the process recorded as `pid`, started at `start_mark` (empty: not recorded, as for runs
// begun before schema 10), still runs on this host. Only meaningful for ids recorded on this host.
// Without a start mark, an id the kernel has since given to another process reads as alive, which
// errs on the side of leaving a run alone; with one, that process is told apart.
bool process_is_alive(int64_t pid, const std::string& start_mark);

}  // namespace lrmoe::store
