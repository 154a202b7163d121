#pragma once
// What a checkpoint file holds, as LibTorch archives (Note [Checkpoints] in docs/notes.md): its
// format and identity, named tensors and an optimizer's state, written and read back with every
// mismatch a CheckpointError naming the file. Which tensors a trainer puts there is the
// trainer's (core/train/trainer_checkpoint.cpp); the files themselves are core/train/checkpoint.

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/train/checkpoint.hpp"

namespace lrmoe {

// Raised when what a checkpoint holds changes; a checkpoint of another format is refused.
// 4: named tensors, and the sharded experts in parts; 3: no previous owners (2 had them).
inline constexpr int64_t kCheckpointFormat = 4;

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

c10::IValue read_value(torch::serialize::InputArchive& archive, const std::string& key);
// The tensor under `key`, on the CPU.
torch::Tensor read_tensor(torch::serialize::InputArchive& archive, const std::string& key);

// `tensors` under `key`, and `optimizer`'s state (of those tensors) under "optimizer".
void write_state(torch::serialize::OutputArchive& archive, const std::string& key,
                 const NamedTensors& tensors, const torch::optim::Optimizer& optimizer);
// Copies the tensors under `key` into `into`, in place, and loads `optimizer`'s state; throws
// CheckpointError naming `file` and the tensor when the names or a shape differ.
void read_state(torch::serialize::InputArchive& archive, const std::string& key,
                const NamedTensors& into, torch::optim::Optimizer& optimizer,
                const std::filesystem::path& file);

// The tensors write_state wrote under `key`, by name, on the CPU, whatever model they are of:
// what `lrmoe export-hf` converts.
NamedTensors read_named_tensors(torch::serialize::InputArchive& archive, const std::string& key);

void write_identity(torch::serialize::OutputArchive& archive, int64_t step,
                    const CheckpointIdentity& identity);
// Checks a file's format and identity against `expected`; returns its step.
int64_t read_identity(torch::serialize::InputArchive& archive, const std::filesystem::path& file,
                      const CheckpointIdentity& expected);

// How long loading a file took: its checksum, then LibTorch's reading.
struct LoadSeconds {
  double verify = 0;
  double read = 0;
};

// Verifies `file` against its checksum, then has LibTorch read it into `archive` (onto
// `device`), before anything of it is used: LibTorch 1.13 does not check its archive's CRCs.
// What LibTorch throws while it reads is rethrown by rethrow_as_unreadable.
LoadSeconds load_verified(torch::serialize::InputArchive& archive,
                          const std::filesystem::path& file, const torch::Device& device);

// An error of LibTorch's while reading `file` (`why`, without its backtrace), as the one line a
// user acts on.
CheckpointError unreadable(const std::filesystem::path& file, const std::string& why);

// For a catch (...) around reading `file`: rethrows a CheckpointError as it is, and whatever
// LibTorch threw (a c10::Error; TorchScript's own error types for a missing key or an unknown
// type, found by fuzz_checkpoint_file) as unreadable().
[[noreturn]] void rethrow_as_unreadable(const std::filesystem::path& file);

}  // namespace lrmoe
