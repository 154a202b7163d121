#pragma once
// `lrmoe resume RUN [--db PATH]`: continues a stopped, interrupted or failed run from its newest
// checkpoint, in the same database rows (Note [Checkpoints] in docs/notes.md): the experiment the
// run recorded, on as many processes as it had, from the step after the checkpoint; the rows of
// later steps are recorded again. The build must be the run's (the checkpoint's identity holds it)
// and so must every policy plugin's library, unless told otherwise.

#include <cstdint>
#include <string>

namespace lrmoe {

// What `lrmoe resume` is told to accept: each is recorded as a warning event of the run.
struct ResumeOptions {
  // A policy plugin library whose SHA-256 differs from the one recorded when the run began.
  bool allow_changed_plugins = false;
  // A build of lrmoe other than the one that trained the run: the resumed steps need not train
  // as the uninterrupted run would have.
  bool allow_changed_code = false;
};

// Returns the resumed run's exit code (run_command's, or launch_command's for several
// processes). Throws, before anything is written, when the run does not exist, cannot be resumed
// (running or finished), has no checkpoint, was trained by another build, or recorded a plugin
// library whose SHA-256 the library found now does not have, unless `options` accept it.
int resume_command(int64_t run, const std::string& database, const ResumeOptions& options = {});

}  // namespace lrmoe
