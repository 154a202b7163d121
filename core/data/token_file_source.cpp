#include "core/data/token_file_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>

#include "core/data/corpus_manifest.hpp"
#include "core/data/mapped_file.hpp"
#include "core/data/token_array.hpp"
#include "core/data/windowed_source.hpp"
#include "core/system/sha256.hpp"

namespace lrmoe {
namespace {

// Assembling the value from bytes reads little-endian on any host; compilers turn it into a
// plain load on little-endian machines.
template <typename Word>
Word read_little_endian(const unsigned char* bytes) {
  Word value = 0;
  for (size_t i = 0; i < sizeof(Word); ++i) value |= static_cast<Word>(bytes[i]) << (8 * i);
  return value;
}

template <typename Word>
class MappedTokenArray final : public TokenArray {
 public:
  explicit MappedTokenArray(std::unique_ptr<MappedFile> file) : file_(std::move(file)) {}

  int64_t size() const override { return static_cast<int64_t>(file_->size() / sizeof(Word)); }

  void copy(int64_t begin, int64_t count, int64_t* out) const override {
    const unsigned char* bytes = file_->data() + static_cast<size_t>(begin) * sizeof(Word);
    for (int64_t i = 0; i < count; ++i) {
      out[i] = read_little_endian<Word>(bytes + static_cast<size_t>(i) * sizeof(Word));
    }
  }

  // The first token whose id is not below `vocab_size`, or size() when all are valid.
  int64_t first_outside(int64_t vocab_size) const {
    const unsigned char* bytes = file_->data();
    const int64_t total = size();
    // A branch-free maximum per block vectorises, so a multi-gigabyte file is checked at
    // memory speed; only a block that holds a bad id is searched token by token.
    constexpr int64_t kBlock = 1 << 16;
    for (int64_t block = 0; block < total; block += kBlock) {
      const int64_t end = std::min(total, block + kBlock);
      Word largest = 0;
      for (int64_t i = block; i < end; ++i) {
        largest = std::max(largest, read_little_endian<Word>(bytes + i * sizeof(Word)));
      }
      if (static_cast<int64_t>(largest) < vocab_size) continue;
      for (int64_t i = block; i < end; ++i) {
        if (static_cast<int64_t>(read_little_endian<Word>(bytes + i * sizeof(Word))) >=
            vocab_size) {
          return i;
        }
      }
    }
    return total;
  }

 private:
  std::unique_ptr<MappedFile> file_;
};

template <typename Word>
std::unique_ptr<TokenSource> open_as(const DataConfig& config, std::unique_ptr<MappedFile> file,
                                     const char* dtype_name, uint64_t seed, int64_t seq_len) {
  const size_t bytes = file->size();
  if (bytes % sizeof(Word) != 0) {
    throw DataError(
        fmt::format("token file '{}' has {} bytes, not a whole number of {}-byte {} tokens: check "
                    "data.token_dtype or whether the file was cut short",
                    config.path, bytes, sizeof(Word), dtype_name));
  }
  // The manifest first: when it disagrees with data.token_dtype, it says why the ids look wrong.
  const std::string sha256 =
      sha256_hex({reinterpret_cast<const char*>(file->data()), file->size()});
  const auto count = static_cast<int64_t>(bytes / sizeof(Word));
  DataProvenance provenance{"tokens", config.path, static_cast<int64_t>(bytes),
                            sha256,   count,       read_corpus_manifest(config, count, sha256)};
  auto tokens = std::make_unique<MappedTokenArray<Word>>(std::move(file));
  const int64_t bad = tokens->first_outside(config.vocab_size);
  if (bad < tokens->size()) {
    int64_t value = 0;
    tokens->copy(bad, 1, &value);
    throw DataError(fmt::format(
        "token file '{}' has token id {} at index {}, outside the declared vocabulary "
        "data.vocab_size = {}: raise data.vocab_size above it or check data.token_dtype",
        config.path, value, bad, config.vocab_size));
  }
  std::string description = fmt::format("tokens: '{}' ({}, vocabulary {}), {} tokens", config.path,
                                        dtype_name, config.vocab_size, tokens->size());
  if (const auto& corpus = provenance.corpus) {
    description +=
        fmt::format(" of the corpus '{}' ({} bytes, SHA-256 {}), tokenizer {}", corpus->name,
                    corpus->bytes, corpus->sha256.substr(0, 12), corpus->tokenizer);
  }
  return std::make_unique<WindowedSource>(std::move(tokens), config.vocab_size,
                                          std::move(provenance), description, config.val_fraction,
                                          seed, seq_len);
}

}  // namespace

std::unique_ptr<TokenSource> open_token_file_source(const DataConfig& config, uint64_t seed,
                                                    int64_t seq_len) {
  const std::filesystem::path path(config.path);
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    throw DataError("token file '" + config.path +
                    "' does not exist: set data.path to a flat binary file of token ids");
  }
  if (std::filesystem::is_directory(path, error)) {
    throw DataError("token file '" + config.path +
                    "' is a folder: set data.path to a single flat binary file of token ids");
  }
  auto file = std::make_unique<MappedFile>(path);
  if (file->size() == 0) {
    throw DataError("token file '" + config.path +
                    "' is empty: point data.path at a file of token ids");
  }
  if (config.token_dtype == TokenDtype::Uint16) {
    return open_as<uint16_t>(config, std::move(file), "uint16", seed, seq_len);
  }
  return open_as<uint32_t>(config, std::move(file), "uint32", seed, seq_len);
}

}  // namespace lrmoe
