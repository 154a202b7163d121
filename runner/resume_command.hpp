#pragma once
// `lrmoe resume RUN [--db PATH]`: continues a stopped, interrupted or failed run from its newest
// checkpoint, in the same database rows (Note [Checkpoints] in docs/notes.md): the experiment the
// run recorded, on as many processes as it had, from the step after the checkpoint; the rows of
// later steps are recorded again. The code version must be the run's (the checkpoint's identity
// holds it) and so must every policy plugin's library.

#include <cstdint>
#include <string>

namespace lrmoe {

// Returns the resumed run's exit code (run_command's, or launch_command's for several
// processes). Throws, before anything is written, when the run does not exist, cannot be resumed
// (running or finished), has no checkpoint, or recorded a plugin library whose SHA-256 the
// library found now does not have; `allow_changed_plugins` resumes with the changed libraries,
// each recorded as a warning event of the run.
int resume_command(int64_t run, const std::string& database, bool allow_changed_plugins = false);

}  // namespace lrmoe
