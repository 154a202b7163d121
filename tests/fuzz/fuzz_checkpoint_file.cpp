// Fuzz target: a checkpoint file, resumed into a model of two tensors with their AdamW state, as
// the trainer resumes (core/train/trainer_checkpoint.cpp). It must resume, or be refused with a
// CheckpointError; nothing else may escape, and nothing may crash. The first byte picks what the
// rest is:
//   even: the checksum file beside a valid checkpoint;
//   odd: the recipe of a well-formed archive that lrmoe did not write, with its right checksum:
//        which keys it holds, its format number, its tensors' names, shapes and dtypes, and its
//        optimizer's state (lrmoe's readers, past LibTorch's parser).
// Raw bytes with a matching checksum are not fuzzed: LibTorch 1.13's reader crashes on crafted
// archives (a SIGSEGV in its TorchScript type parser, a 4 GiB allocation in its unpickler, found
// by this target's first runs), so a file whose checksum holds is trusted as lrmoe's own (Note
// [Checkpoints]).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/system/sha256.hpp"
#include "core/train/checkpoint.hpp"
#include "core/train/checkpoint_archive.hpp"

namespace {

namespace fs = std::filesystem;

const lrmoe::CheckpointIdentity kIdentity{"experiment", "code"};

// The model a checkpoint is resumed into: two tensors, and an AdamW over them.
struct Model {
  lrmoe::NamedTensors tensors{{"layer.weight", torch::zeros({2, 3}, torch::requires_grad())},
                              {"layer.bias", torch::zeros({4}, torch::requires_grad())}};
  torch::optim::AdamW optimizer{std::vector<torch::Tensor>{tensors[0].second, tensors[1].second}};
};

// One AdamW step on `tensors`, so that the optimizer has state to save or to use.
void train_one_step(const std::vector<torch::Tensor>& tensors, torch::optim::Optimizer& optimizer) {
  torch::Tensor total = torch::zeros({});
  for (const torch::Tensor& t : tensors) total = total + t.sum();
  total.backward();
  optimizer.step();
}

std::string bytes_of(torch::serialize::OutputArchive& archive) {
  std::ostringstream bytes;
  archive.save_to(bytes);
  return bytes.str();
}

// A valid checkpoint of Model, after one optimizer step.
std::string valid_checkpoint() {
  Model model;
  train_one_step({model.tensors[0].second, model.tensors[1].second}, model.optimizer);
  torch::serialize::OutputArchive archive;
  lrmoe::write_identity(archive, 1, kIdentity);
  lrmoe::write_state(archive, "model", model.tensors, model.optimizer);
  return bytes_of(archive);
}

// A well-formed archive built from fuzz bytes: each byte read picks one choice (0 past the end).
class Recipe {
 public:
  Recipe(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  std::string archive() {
    const uint8_t keys = next();
    torch::serialize::OutputArchive archive;
    if (keys & 1) {
      const int64_t format = next() < 200 ? lrmoe::kCheckpointFormat : next();
      archive.write("format", c10::IValue(format));
    }
    if (keys & 2) archive.write("step", c10::IValue(static_cast<int64_t>(next()) - 8));
    if (keys & 4)
      archive.write("experiment_sha256", c10::IValue(next() < 200 ? "experiment" : "x"));
    if (keys & 8)
      archive.write("code_version", next() < 200 ? c10::IValue("code") : c10::IValue(1.5));
    if (keys & 16) {
      lrmoe::NamedTensors tensors;
      const int count = next() % 4;
      for (int i = 0; i < count; ++i) {
        static const char* names[] = {"layer.weight", "layer.bias", "other"};
        tensors.emplace_back(names[next() % 3], tensor());
      }
      std::vector<torch::Tensor> trainable;
      for (auto& named : tensors) {
        // AdamW on the CPU steps float32 and float64 only; a half tensor is saved untrained.
        const torch::ScalarType type = named.second.scalar_type();
        if (type == torch::kFloat32 || type == torch::kFloat64)
          trainable.push_back(named.second.requires_grad_());
      }
      torch::optim::AdamW optimizer(trainable);
      if ((next() & 1) != 0 && !trainable.empty()) train_one_step(trainable, optimizer);
      lrmoe::write_state(archive, "model", tensors, optimizer);
    }
    return bytes_of(archive);
  }

 private:
  uint8_t next() { return used_ < size_ ? data_[used_++] : 0; }

  torch::Tensor tensor() {
    static const torch::ScalarType dtypes[] = {torch::kFloat32, torch::kFloat64, torch::kFloat16,
                                               torch::kInt64, torch::kBool};
    const torch::ScalarType dtype = dtypes[next() % 5];
    std::vector<int64_t> shape(next() % 4);
    for (int64_t& extent : shape) extent = next() % 6;
    return torch::zeros(shape, dtype);
  }

  const uint8_t* data_;
  size_t size_;
  size_t used_ = 0;
};

void write_file(const fs::path& path, const char* data, size_t size) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(data, static_cast<std::streamsize>(size));
}

const fs::path& folder() {
  static const fs::path path = fs::temp_directory_path() / "lrmoe-fuzz-checkpoint";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  fs::create_directories(folder());
  static const std::string valid = valid_checkpoint();
  const fs::path file = lrmoe::checkpoint_path(folder(), 1);
  const fs::path sidecar = file.string() + ".sha256";
  const char* rest = reinterpret_cast<const char*>(data + 1);
  if (data[0] % 2 == 0) {
    write_file(file, valid.data(), valid.size());
    write_file(sidecar, rest, size - 1);
  } else {
    const std::string crafted = Recipe(data + 1, size - 1).archive();
    write_file(file, crafted.data(), crafted.size());
    const std::string line = lrmoe::sha256_hex(crafted) + "  " + file.filename().string() + "\n";
    write_file(sidecar, line.data(), line.size());
  }
  try {
    std::vector<std::string> skipped;
    lrmoe::latest_verified_checkpoint(folder(), skipped);
    Model model;
    torch::serialize::InputArchive archive;
    try {
      lrmoe::load_verified(archive, file, torch::kCPU);
      lrmoe::read_identity(archive, file, kIdentity);
      lrmoe::read_state(archive, "model", model.tensors, model.optimizer, file);
    } catch (...) {
      lrmoe::rethrow_as_unreadable(file);
    }
    // Training goes on from what was read; what the reader let through must train or be a
    // LibTorch error (the trainer's step would report it as such).
    try {
      train_one_step({model.tensors[0].second, model.tensors[1].second}, model.optimizer);
    } catch (const c10::Error&) {
    }
  } catch (const lrmoe::CheckpointError&) {
  }
  return 0;
}
