#pragma once
// Who is writing a run (host name and process id), and whether a recorded process still exists
// on this host: the facts behind marking abandoned runs 'interrupted'.

#include <cstdint>
#include <string>

namespace lrmoe::store {

std::string this_host_name();
int64_t this_process_id();

// Whether a process with this id exists on this host. Only meaningful for ids recorded on this
// host. An id the kernel has since given to another process reads as alive, which errs on the
// side of leaving a run alone.
bool process_is_alive(int64_t pid);

}  // namespace lrmoe::store
