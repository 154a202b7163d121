#pragma once
// safetensors files, written and read to the format's specification
// (https://github.com/huggingface/safetensors, "Format"): an 8-byte little-endian header size N,
// N bytes of JSON naming each tensor's dtype, shape and [begin, end) byte offsets into the data
// that follows (row-major, little-endian), and an optional "__metadata__" map of strings.
// Offsets are 64-bit, so files over 4 GiB work; a file is read through a memory map, so reading
// some tensors of a shard touches only their pages.

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lrmoe {

class MappedFile;

// One tensor of a header: [begin, end) into the data after the header.
struct SafetensorsEntry {
  std::string dtype;  // "F32", "BF16", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // where the data starts in the file: 8 + N
};

// Parses and checks the header of the `size` bytes at `bytes` (a whole file): a size within the
// file and at most 100 MB, JSON of the format's shape, known dtypes, shapes whose bytes are their
// offsets' span, and tensors that tile the data exactly (no overlap, no hole, nothing past the
// end), as the reference implementation requires. Throws HfError starting with `file`.
SafetensorsHeader parse_safetensors_header(const unsigned char* bytes, uint64_t size,
                                           const std::string& file);

// A contiguous block of a tensor: index `index` of its first dimension (-1: all of it), then rows
// [first_row, first_row + rows) of the first dimension left (rows -1: every row). One expert's
// projection in a stacked [experts, rows, columns] tensor is such a block.
struct TensorBlock {
  int64_t index = -1;
  int64_t first_row = 0;
  int64_t rows = -1;
};

// A safetensors file, mapped and its header checked.
class SafetensorsFile {
 public:
  // Throws HfError naming `path` when it cannot be read or is not a valid safetensors file.
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  bool has(const std::string& name) const { return header_.tensors.count(name) > 0; }
  // Tensor `name` (or a block of it) as a CPU tensor of its own dtype, copied out of the map:
  // only the block's pages are read. Throws HfError when the file has none, the block is not
  // inside it, or its dtype is not one LibTorch holds.
  torch::Tensor read(const std::string& name, const TensorBlock& block = {}) const;

 private:
  std::filesystem::path path_;
  std::unique_ptr<MappedFile> map_;
  SafetensorsHeader header_;
};

using NamedTensorList = std::vector<std::pair<std::string, torch::Tensor>>;

struct SafetensorsWritten {
  uint64_t bytes = 0;
  std::string sha256;  // of the file's bytes, computed as they were written
};

// Writes `tensors` (CPU or not; each written as it is, row-major) with `metadata` to `file`
// atomically: into a temporary file beside it, flushed, then renamed. Throws HfError naming the
// file and the cause (a full disk) when any of it fails.
SafetensorsWritten write_safetensors(const std::filesystem::path& file,
                                     const NamedTensorList& tensors,
                                     const std::map<std::string, std::string>& metadata);

// "F32", "BF16", ... for a LibTorch dtype; throws HfError for one safetensors has no name for.
std::string safetensors_dtype(torch::ScalarType type);

}  // namespace lrmoe
