// Fuzz target: a token file. The first byte picks the token type and the vocabulary, the rest is
// the file. It must either open, and then yield in-vocabulary windows, or fail with a DataError.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/data/token_file_source.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string path =
      (std::filesystem::temp_directory_path() / "lrmoe-fuzz-tokens.bin").string();
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  lrmoe::DataConfig config;
  config.kind = lrmoe::DataKind::Tokens;
  config.path = path;
  config.token_dtype = (data[0] & 1) != 0 ? lrmoe::TokenDtype::Uint32 : lrmoe::TokenDtype::Uint16;
  config.vocab_size = 1 + (data[0] >> 1);
  try {
    const auto source = lrmoe::open_token_file_source(config, /*seed=*/1, /*seq_len=*/4);
    const lrmoe::Batch batch = source->train_batch(/*step=*/1, /*micro=*/0, /*batch_size=*/2);
    if (batch.inputs.max().item<int64_t>() >= config.vocab_size ||
        batch.inputs.min().item<int64_t>() < 0)
      __builtin_trap();
  } catch (const lrmoe::DataError&) {
  }
  return 0;
}
