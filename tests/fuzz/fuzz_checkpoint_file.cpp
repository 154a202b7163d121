// Fuzz target: a checkpoint file. The first byte picks what the rest is: even, the checkpoint
// itself with its right SHA-256 beside it (what LibTorch and lrmoe's readers make of a file whose
// checksum holds: a crafted one); odd, the checksum file beside a valid checkpoint. Resuming from
// it must either read it as a model of two tensors with their AdamW state, or refuse it with a
// CheckpointError, or a c10::Error that the trainer turns into one; nothing else may escape, and
// nothing may crash. With LRMOE_FUZZ_WRITE_SEED=PATH it writes a valid input there and exits
// (scripts/fuzz.sh seeds the corpus with it).
#include <cstdint>
#include <cstdlib>
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

// A valid checkpoint of Model, after one optimizer step (so that it has state).
std::string valid_checkpoint() {
  Model model;
  (model.tensors[0].second.sum() + model.tensors[1].second.sum()).backward();
  model.optimizer.step();
  torch::serialize::OutputArchive archive;
  lrmoe::write_identity(archive, 1, kIdentity);
  lrmoe::write_state(archive, "model", model.tensors, model.optimizer);
  std::ostringstream bytes;
  archive.save_to(bytes);
  return bytes.str();
}

void write_file(const fs::path& path, const char* data, size_t size) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(data, static_cast<std::streamsize>(size));
}

const fs::path& folder() {
  static const fs::path path = fs::temp_directory_path() / "lrmoe-fuzz-checkpoint";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fs::create_directories(folder());
  if (const char* seed = std::getenv("LRMOE_FUZZ_WRITE_SEED")) {
    const std::string input = std::string(1, '\0') + valid_checkpoint();
    write_file(seed, input.data(), input.size());
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string valid = valid_checkpoint();
  const fs::path file = lrmoe::checkpoint_path(folder(), 1);
  const char* rest = reinterpret_cast<const char*>(data + 1);
  const std::string sidecar = file.string() + ".sha256";
  if ((data[0] & 1) == 0) {
    write_file(file, rest, size - 1);
    const std::string line = lrmoe::sha256_hex(std::string_view(rest, size - 1)) + "  " +
                             file.filename().string() + "\n";
    write_file(sidecar, line.data(), line.size());
  } else {
    write_file(file, valid.data(), valid.size());
    write_file(sidecar, rest, size - 1);
  }
  try {
    std::vector<std::string> skipped;
    lrmoe::latest_verified_checkpoint(folder(), skipped);
    Model model;
    torch::serialize::InputArchive archive;
    lrmoe::load_verified(archive, file, torch::kCPU);
    lrmoe::read_identity(archive, file, kIdentity);
    lrmoe::read_state(archive, "model", model.tensors, model.optimizer, file);
    // Training goes on from what was read.
    (model.tensors[0].second.sum() + model.tensors[1].second.sum()).backward();
    model.optimizer.step();
  } catch (const lrmoe::CheckpointError&) {
  } catch (const c10::Error&) {
  }
  return 0;
}
