#include "core/hf/safetensors_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/data/mapped_file.hpp"
#include "core/data/token_source.hpp"
#include "core/hf/hf_error.hpp"
#include "core/system/atomic_file.hpp"

namespace lrmoe {
namespace {

using nlohmann::json;

// The reference implementation refuses larger headers: a header is JSON about the tensors, a
// few megabytes for the largest models.
constexpr uint64_t kMostHeaderBytes = 100'000'000;

struct DtypeName {
  const char* name;
  torch::ScalarType type;
  int64_t bytes;
};

// The safetensors dtypes LibTorch 1.13 holds (safetensors has more: F8 kinds, U16 and up).
constexpr DtypeName kDtypes[] = {{"F64", torch::kFloat64, 8}, {"F32", torch::kFloat32, 4},
                                 {"F16", torch::kFloat16, 2}, {"BF16", torch::kBFloat16, 2},
                                 {"I64", torch::kInt64, 8},   {"I32", torch::kInt32, 4},
                                 {"I16", torch::kInt16, 2},   {"I8", torch::kInt8, 1},
                                 {"U8", torch::kUInt8, 1},    {"BOOL", torch::kBool, 1}};

// Bytes per element of a safetensors dtype, including those LibTorch does not hold (a file of
// them still parses; reading such a tensor is refused).
int64_t dtype_bytes(const std::string& dtype) {
  for (const DtypeName& d : kDtypes)
    if (dtype == d.name) return d.bytes;
  if (dtype == "U16") return 2;
  if (dtype == "U32") return 4;
  if (dtype == "U64") return 8;
  if (dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

[[noreturn]] void bad(const std::string& file, const std::string& what) {
  throw HfError(fmt::format("{}: not a valid safetensors file: {}", file, what));
}

uint64_t read_le64(const unsigned char* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

SafetensorsEntry parse_entry(const std::string& file, const std::string& name, const json& v) {
  if (!v.is_object()) bad(file, fmt::format("tensor '{}' is not an object", name));
  SafetensorsEntry entry;
  const auto dtype = v.find("dtype");
  const auto shape = v.find("shape");
  const auto offsets = v.find("data_offsets");
  if (dtype == v.end() || !dtype->is_string() || shape == v.end() || !shape->is_array() ||
      offsets == v.end() || !offsets->is_array() || offsets->size() != 2) {
    bad(file, fmt::format("tensor '{}' needs dtype, shape and data_offsets [begin, end]", name));
  }
  entry.dtype = dtype->get<std::string>();
  const int64_t element = dtype_bytes(entry.dtype);
  if (element == 0) bad(file, fmt::format("tensor '{}' has unknown dtype '{}'", name, entry.dtype));
  // The element count, checked against overflow: a shape of huge dimensions must not wrap.
  uint64_t count = 1;
  for (const json& d : *shape) {
    if (!d.is_number_unsigned()) bad(file, fmt::format("tensor '{}' has a bad shape", name));
    const uint64_t size = d.get<uint64_t>();
    // Every dimension fits a tensor's int64 size, and so does the product of the nonzero ones.
    if (size > uint64_t{INT64_MAX} || (size != 0 && count > (UINT64_MAX / 8) / size))
      bad(file, fmt::format("tensor '{}' has a shape too large", name));
    count *= size;
    entry.shape.push_back(static_cast<int64_t>(size));
  }
  for (const json& o : *offsets) {
    if (!o.is_number_unsigned()) bad(file, fmt::format("tensor '{}' has bad data_offsets", name));
  }
  entry.begin = (*offsets)[0].get<uint64_t>();
  entry.end = (*offsets)[1].get<uint64_t>();
  if (entry.end < entry.begin || entry.end - entry.begin != count * element) {
    bad(file, fmt::format("tensor '{}' has data_offsets [{}, {}], but its shape and dtype take "
                          "{} bytes",
                          name, entry.begin, entry.end, count * element));
  }
  return entry;
}

}  // namespace

std::string safetensors_dtype(torch::ScalarType type) {
  for (const DtypeName& d : kDtypes)
    if (d.type == type) return d.name;
  throw HfError(fmt::format("safetensors has no dtype for {}", c10::toString(type)));
}

SafetensorsHeader parse_safetensors_header(const unsigned char* bytes, uint64_t size,
                                           const std::string& file) {
  if (size < 8) bad(file, fmt::format("{} bytes, shorter than the 8-byte header size", size));
  const uint64_t header_size = read_le64(bytes);
  if (header_size > kMostHeaderBytes)
    bad(file, fmt::format("a header of {} bytes (at most {})", header_size, kMostHeaderBytes));
  if (header_size > size - 8)
    bad(file, fmt::format("a header of {} bytes in a file of {}", header_size, size));
  const char* text = reinterpret_cast<const char*>(bytes + 8);
  const json header = json::parse(text, text + header_size, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) bad(file, "its header is not a JSON object");

  SafetensorsHeader parsed;
  parsed.data_offset = 8 + header_size;
  for (const auto& item : header.items()) {
    if (item.key() == "__metadata__") {
      if (!item.value().is_object()) bad(file, "__metadata__ is not an object");
      for (const auto& m : item.value().items()) {
        if (!m.value().is_string()) bad(file, "__metadata__ values must be strings");
        parsed.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    parsed.tensors[item.key()] = parse_entry(file, item.key(), item.value());
  }
  // The tensors tile the data exactly: sorted by offset, each starts where the one before
  // ended, and the last ends at the end of the file.
  std::vector<const SafetensorsEntry*> order;
  for (const auto& [name, entry] : parsed.tensors) order.push_back(&entry);
  std::sort(order.begin(), order.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin < b->begin || (a->begin == b->begin && a->end < b->end);
  });
  uint64_t next = 0;
  for (const SafetensorsEntry* entry : order) {
    if (entry->begin != next) bad(file, "its tensors overlap or leave a hole in the data");
    next = entry->end;
  }
  if (next != size - parsed.data_offset) {
    bad(file, fmt::format("its tensors take {} bytes of the {} after the header", next,
                          size - parsed.data_offset));
  }
  return parsed;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  try {
    map_ = std::make_unique<MappedFile>(path);
  } catch (const DataError& e) {
    throw HfError(e.what());
  }
  header_ = parse_safetensors_header(map_->data(), map_->size(), path.string());
}

SafetensorsFile::~SafetensorsFile() = default;

torch::Tensor SafetensorsFile::read(const std::string& name, const TensorBlock& block) const {
  const auto it = header_.tensors.find(name);
  if (it == header_.tensors.end())
    throw HfError(fmt::format("{}: has no tensor '{}'", path_.string(), name));
  const SafetensorsEntry& entry = it->second;
  const auto dtype = std::find_if(std::begin(kDtypes), std::end(kDtypes),
                                  [&](const DtypeName& d) { return entry.dtype == d.name; });
  if (dtype == std::end(kDtypes)) {
    throw HfError(
        fmt::format("{}: tensor '{}' is {}, a dtype lrmoe does not read; convert it "
                    "to F32 or BF16",
                    path_.string(), name, entry.dtype));
  }
  // The block's shape and where its bytes start, in elements.
  std::vector<int64_t> shape = entry.shape;
  int64_t skipped = 0;
  auto take = [&](int64_t first, int64_t count) {
    if (shape.empty() || first < 0 || count < 0 || first + count > shape[0]) {
      throw HfError(fmt::format("{}: tensor '{}' of shape {} has no block [{}, {})", path_.string(),
                                name, c10::str(entry.shape), first, first + count));
    }
    int64_t inner = 1;
    for (std::size_t d = 1; d < shape.size(); ++d) inner *= shape[d];
    skipped += first * inner;
    shape[0] = count;
  };
  if (block.index >= 0) {
    take(block.index, 1);
    shape.erase(shape.begin());
  }
  if (block.rows >= 0) take(block.first_row, block.rows);
  torch::Tensor tensor = torch::empty(shape, torch::TensorOptions().dtype(dtype->type));
  const auto bytes = static_cast<std::size_t>(tensor.numel()) * tensor.element_size();
  // The map holds the file's bytes as they are: little-endian, as this machine is.
  if (bytes > 0) {
    std::memcpy(tensor.data_ptr(),
                map_->data() + header_.data_offset + entry.begin +
                    static_cast<uint64_t>(skipped) * tensor.element_size(),
                bytes);
  }
  return tensor;
}

SafetensorsWritten write_safetensors(const std::filesystem::path& file,
                                     const NamedTensorList& tensors,
                                     const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const uint64_t bytes = static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
    header[name] = {{"dtype", safetensors_dtype(tensor.scalar_type())},
                    {"shape", tensor.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // Padded with spaces so that the data starts 8-byte aligned, as the specification allows.
  text.append((8 - text.size() % 8) % 8, ' ');
  SafetensorsWritten written;
  try {
    written.sha256 = write_file_atomically(file, [&](const ByteSink& sink) {
      unsigned char size[8];
      for (int i = 0; i < 8; ++i) size[i] = static_cast<unsigned char>(text.size() >> (8 * i));
      sink(size, 8);
      sink(text.data(), text.size());
      written.bytes = 8 + text.size();
      for (const auto& [name, tensor] : tensors) {
        const torch::Tensor host = tensor.to(torch::kCPU).contiguous();
        const auto bytes = static_cast<std::size_t>(host.numel()) * host.element_size();
        if (bytes > 0) sink(host.data_ptr(), bytes);
        written.bytes += bytes;
      }
    });
  } catch (const std::exception& e) {
    throw HfError(
        fmt::format("cannot write {}: {}; check that the folder is writable and has "
                    "room (and the file-size limit, ulimit -f)",
                    file.string(), e.what()));
  }
  return written;
}

}  // namespace lrmoe
