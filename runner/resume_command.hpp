#pragma once
// `lrmoe resume RUN [--db PATH]`: continues a stopped, interrupted or failed run from its newest
// checkpoint, in the same database rows (Note [Checkpoints] in docs/notes.md): the experiment the
// run recorded, on as many processes as it had, from the step after the checkpoint; the rows of
// later steps are recorded again.

#include <cstdint>
#include <string>

namespace lrmoe {

// Returns the resumed run's exit code (run_command's, or launch_command's for several
// processes). Throws, before anything is written, when the run does not exist, cannot be resumed
// (running or finished), or has no checkpoint.
int resume_command(int64_t run, const std::string& database);

}  // namespace lrmoe
