#pragma once
// Checkpoint files of a training run (Note [Checkpoints] in docs/notes.md): their names, an
// atomic write (a crash never leaves a partial file under a checkpoint's name), which are kept,
// and the identity that refuses a checkpoint of another experiment or build. What a checkpoint
// holds is the trainer's (Trainer::save_checkpoint).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/system/atomic_file.hpp"

namespace lrmoe {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a checkpoint must match to be resumed: the experiment (resolved, without what may differ
// between runs of it: threads, database path) and the build that wrote it.
struct CheckpointIdentity {
  std::string experiment_sha256;
  std::string code_version;
};

// `folder`/step-00000012.pt: the checkpoint's main file, written last (Note [Checkpoints]).
std::filesystem::path checkpoint_path(const std::filesystem::path& folder, int64_t step);

// `folder`/step-00000012.process-1.pt: what process 1 of a run with expert-sharded state holds
// alone (its experts and their optimizer state), written before the main file.
std::filesystem::path checkpoint_part_path(const std::filesystem::path& folder, int64_t step,
                                           int64_t process);

// The newest checkpoint of `folder` by step (its main file); none when it has none (or does not
// exist). A step whose parts were written but not its main file is not a checkpoint.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& folder);

// Calls `write` with a sink into a temporary file beside `file`, flushes it to the disk, then
// renames it to `file`. Before the rename, the SHA-256 of the bytes written is put beside it, as
// `file`.sha256 in sha256sum's format, so that a checkpoint is never without its checksum.
// Throws CheckpointError naming the file and the cause (a full disk, a file-size limit) when any
// of it fails; the temporary files are removed and an earlier checkpoint is untouched.
void write_atomically(const std::filesystem::path& file,
                      const std::function<void(const ByteSink& sink)>& write);

// Throws CheckpointError naming `file` and what to do when its bytes do not have the SHA-256
// written with it, or it has none (Note [Checkpoints]).
void verify_checkpoint_file(const std::filesystem::path& file);

// The newest checkpoint of `folder` whose main file and parts all verify; each newer one that
// does not is skipped, with why, in `skipped`. None when no checkpoint verifies.
std::optional<std::filesystem::path> latest_verified_checkpoint(const std::filesystem::path& folder,
                                                                std::vector<std::string>& skipped);

// Removes all but the newest `keep` checkpoints of `folder`, with their parts, every part of a
// step that is not a checkpoint, and every temporary file (writes cut short).
void prune_checkpoints(const std::filesystem::path& folder, int64_t keep);

// Throws CheckpointError naming `file` and what differs when `found` is not `expected`; an empty
// field of `expected` is not checked.
void check_checkpoint_identity(const std::filesystem::path& file, const CheckpointIdentity& found,
                               const CheckpointIdentity& expected);

}  // namespace lrmoe
