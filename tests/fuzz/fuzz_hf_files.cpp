// Fuzz target: what a Hugging Face folder gives lrmoe to read. The first byte picks the reader:
// even, a safetensors file (its header size, header and data); odd, a config.json. Every input
// must either read or fail with an HfError (safetensors) or a ConfigError (config.json); a read
// safetensors file must give each of its tensors back. Any other exception, a crash, a hang or
// a sanitizer report is a finding.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/config/config_error.hpp"
#include "core/config/hf_model_config.hpp"
#include "core/hf/hf_error.hpp"
#include "core/hf/safetensors_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool safetensors = data[0] % 2 == 0;
  const auto* bytes = data + 1;
  const size_t length = size - 1;
  static const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / "lrmoe-fuzz-hf";
  std::filesystem::create_directories(folder);
  const std::filesystem::path file = folder / (safetensors ? "model.safetensors" : "config.json");
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes), static_cast<std::streamsize>(length));
  if (safetensors) {
    try {
      const lrmoe::SafetensorsFile read(file);
      for (const auto& [name, entry] : read.header().tensors) {
        try {
          (void)read.read(name);
        } catch (const lrmoe::HfError&) {  // a dtype LibTorch does not hold
        }
      }
    } catch (const lrmoe::HfError&) {
    }
  } else {
    try {
      const lrmoe::HfModel model = lrmoe::read_hf_config(file);
      (void)lrmoe::hf_config_json(model.model, model.family, "float32");
    } catch (const lrmoe::ConfigError&) {
    }
  }
  return 0;
}
