// Fuzz target: the load files replay reads (core/replay/expert_load_csv.hpp,
// core/replay/routing_npy.hpp). The first byte picks the reader (even: CSV, odd: .npy, with
// tokens per step from its upper bits), the rest is the file. It must either read, and then hold
// loads of one shape (every step as many layers, every layer as many experts), or fail with
// std::invalid_argument.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "core/replay/expert_load_csv.hpp"
#include "core/replay/routing_npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string path =
      (std::filesystem::temp_directory_path() / "lrmoe-fuzz-loads").string();
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  try {
    const lrmoe::RecordedExpertLoads loads =
        (data[0] & 1) == 0 ? lrmoe::read_expert_load_csv(path)
                           : lrmoe::read_routing_npy(path, 1 + (data[0] >> 1));
    if (loads.steps.empty() || loads.steps.size() != loads.pairs.size()) __builtin_trap();
    for (const auto& layers : loads.pairs) {
      if (layers.size() != loads.pairs.front().size()) __builtin_trap();
      for (const auto& experts : layers)
        if (experts.size() != loads.pairs.front().front().size()) __builtin_trap();
    }
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
