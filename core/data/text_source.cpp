#include "core/data/text_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <utility>

#include "core/data/token_array.hpp"
#include "core/data/windowed_source.hpp"
#include "core/system/file_kind.hpp"
#include "core/system/sha256.hpp"

namespace lrmoe {
namespace {

class ByteArray final : public TokenArray {
 public:
  explicit ByteArray(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  int64_t size() const override { return static_cast<int64_t>(bytes_.size()); }
  void copy(int64_t begin, int64_t count, int64_t* out) const override {
    std::copy_n(bytes_.begin() + begin, count, out);
  }

 private:
  std::vector<uint8_t> bytes_;
};

void append_file(const std::filesystem::path& file, std::vector<uint8_t>& bytes) {
  // Checked before opening: opening a FIFO waits for a writer.
  if (const std::string why = not_a_regular_file(file); !why.empty()) {
    throw DataError("cannot read text file '" + file.string() + "' (" + why +
                    "): point data.path at a regular file or a folder of them");
  }
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(file, error);
  std::ifstream stream(file, std::ios::binary);
  const size_t offset = bytes.size();
  if (!error && stream) {
    bytes.resize(offset + static_cast<size_t>(size));
    stream.read(reinterpret_cast<char*>(bytes.data() + offset), static_cast<std::streamsize>(size));
  }
  // Reading exactly the size the file system reports catches both unopenable files and read
  // errors part-way through.
  if (error || !stream || static_cast<std::uintmax_t>(stream.gcount()) != size) {
    throw DataError("cannot read text file '" + file.string() +
                    "': check that it is a readable regular file, or point data.path elsewhere");
  }
}

std::vector<std::filesystem::path> files_under(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (auto it = std::filesystem::recursive_directory_iterator(folder, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    // Hidden entries (.git, editor swap files) are tooling, not corpus.
    if (it->path().filename().string().rfind('.', 0) == 0) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) files.push_back(it->path());
  }
  if (error) {
    throw DataError("cannot list text folder '" + folder.string() + "': " + error.message() +
                    ": check its permissions");
  }
  // Directory order is arbitrary; sorting makes the corpus, and so every batch, reproducible.
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::vector<uint8_t> read_text_corpus(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    throw DataError("text data '" + path.string() +
                    "' does not exist: set data.path to a UTF-8 file or a folder of them");
  }
  std::vector<uint8_t> bytes;
  if (std::filesystem::is_directory(path, error)) {
    const std::vector<std::filesystem::path> files = files_under(path);
    if (files.empty()) {
      throw DataError("text folder '" + path.string() +
                      "' contains no files: put text files in it or set data.path elsewhere");
    }
    for (const auto& file : files) append_file(file, bytes);
  } else {
    append_file(path, bytes);
  }
  if (bytes.empty()) {
    throw DataError("text data '" + path.string() +
                    "' is empty: give data.path a file (or folder) with text in it");
  }
  return bytes;
}

std::unique_ptr<TokenSource> open_text_source(const DataConfig& config, uint64_t seed,
                                              int64_t seq_len) {
  std::vector<uint8_t> bytes = read_text_corpus(config.path);
  const std::string description = fmt::format("text: '{}' as bytes (vocabulary {}), {} bytes",
                                              config.path, kByteVocabulary, bytes.size());
  const auto size = static_cast<int64_t>(bytes.size());
  DataProvenance provenance{
      "text", config.path,
      size,   sha256_hex({reinterpret_cast<const char*>(bytes.data()), bytes.size()}),
      size,   std::nullopt};
  return std::make_unique<WindowedSource>(std::make_unique<ByteArray>(std::move(bytes)),
                                          kByteVocabulary, std::move(provenance), description,
                                          config.val_fraction, seed, seq_len);
}

}  // namespace lrmoe
