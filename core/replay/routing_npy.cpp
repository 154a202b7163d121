#include "core/replay/routing_npy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <vector>

#include "core/replay/expert_load_csv.hpp"

namespace lrmoe {
namespace {

struct NpyHeader {
  char kind = 'i';  // 'i' signed, 'u' unsigned
  int64_t item_bytes = 0;
  std::vector<int64_t> shape;
  int64_t data_offset = 0;
};

// The value of `key` in the header's dictionary text, up to its closing `end` (or the next
// comma when `end` is 0), trimmed.
std::string header_value(const std::string& header, const std::string& key, char end) {
  const std::size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) return "";
  const std::size_t colon = header.find(':', at);
  if (colon == std::string::npos) return "";
  std::size_t start = header.find_first_not_of(" ", colon + 1);
  if (start == std::string::npos) return "";
  std::size_t stop = end == 0 ? header.find_first_of(",}", start) : header.find(end, start + 1);
  if (stop == std::string::npos) return "";
  if (end != 0) ++stop;
  return header.substr(start, stop - start);
}

NpyHeader read_header(std::ifstream& in, const std::string& path) {
  auto fail = [&](const std::string& what) {
    return std::invalid_argument(fmt::format("{}: {}", path, what));
  };
  char magic[8] = {};
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    throw fail("not a NumPy .npy file (no \\x93NUMPY magic); save the routing with numpy.save");
  const int major = static_cast<unsigned char>(magic[6]);
  if (major < 1 || major > 3) throw fail(fmt::format(".npy format version {} is not read", major));
  unsigned char size_bytes[4] = {};
  const int width = major == 1 ? 2 : 4;
  if (!in.read(reinterpret_cast<char*>(size_bytes), width)) throw fail("the header is cut short");
  int64_t length = 0;
  for (int i = width - 1; i >= 0; --i) length = length * 256 + size_bytes[i];
  if (length > (int64_t{1} << 20)) throw fail("a header of more than 1 MiB");
  std::string header(static_cast<std::size_t>(length), '\0');
  if (!in.read(header.data(), length)) throw fail("the header is cut short");

  NpyHeader parsed;
  parsed.data_offset = 8 + width + length;
  const std::string descr = header_value(header, "descr", '\'');
  // '<i8', '|u1': byte order, kind, size.
  if (descr.size() != 5 || (descr[1] != '<' && descr[1] != '|') ||
      (descr[2] != 'i' && descr[2] != 'u') ||
      std::string("1248").find(descr[3]) == std::string::npos)
    throw fail(
        fmt::format("dtype {} is not read: the expert ids are little-endian integers "
                    "(numpy int8 to int64, uint8 to uint64)",
                    descr.empty() ? "(none)" : descr));
  parsed.kind = descr[2];
  parsed.item_bytes = descr[3] - '0';
  if (header_value(header, "fortran_order", 0) != "False")
    throw fail("the array is in Fortran order; save it in C order (numpy.ascontiguousarray)");
  const std::string shape = header_value(header, "shape", ')');
  std::size_t at = shape.find('(');
  while (at != std::string::npos && at + 1 < shape.size()) {
    const std::size_t start = shape.find_first_of("0123456789", at + 1);
    if (start == std::string::npos) break;
    std::size_t stop = start;
    int64_t size = 0;
    while (stop < shape.size() && std::isdigit(static_cast<unsigned char>(shape[stop]))) {
      if (size > (std::numeric_limits<int64_t>::max() - 9) / 10) throw fail("a shape too large");
      size = size * 10 + (shape[stop++] - '0');
    }
    parsed.shape.push_back(size);
    at = stop;
  }
  if (parsed.shape.size() != 3 ||
      std::any_of(parsed.shape.begin(), parsed.shape.end(), [](int64_t s) { return s <= 0; }))
    throw fail(fmt::format("shape {} is not [tokens, layers, top_k] with every size above 0",
                           shape.empty() ? "(none)" : shape));
  return parsed;
}

int64_t item_at(const unsigned char* bytes, char kind, int64_t width) {
  uint64_t bits = 0;
  for (int64_t i = width - 1; i >= 0; --i) bits = (bits << 8) | bytes[i];
  if (kind == 'u')
    return bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
               ? std::numeric_limits<int64_t>::max()
               : static_cast<int64_t>(bits);
  // Sign-extend a narrower two's-complement value.
  const int shift = static_cast<int>(64 - 8 * width);
  return static_cast<int64_t>(bits << shift) >> shift;
}

}  // namespace

RecordedExpertLoads read_routing_npy(const std::string& path, int64_t tokens_per_step) {
  if (tokens_per_step < 1)
    throw std::invalid_argument(fmt::format("{}: {} tokens per step", path, tokens_per_step));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot be read", path));
  const NpyHeader header = read_header(in, path);
  const int64_t tokens = header.shape[0], layers = header.shape[1], top_k = header.shape[2];
  const int64_t most = std::numeric_limits<int64_t>::max();
  if (layers > most / top_k || layers * top_k > most / header.item_bytes / tokens)
    throw std::invalid_argument(fmt::format("{}: a shape too large", path));
  const int64_t row_bytes = layers * top_k * header.item_bytes;
  in.seekg(0, std::ios::end);
  const int64_t data_bytes = static_cast<int64_t>(in.tellg()) - header.data_offset;
  if (data_bytes != tokens * row_bytes)
    throw std::invalid_argument(fmt::format(
        "{}: {} bytes of data where shape ({}, {}, {}) of {}-byte ids needs {}; the file is cut "
        "short or not one array",
        path, data_bytes, tokens, layers, top_k, header.item_bytes, tokens * row_bytes));
  in.seekg(header.data_offset);

  const int64_t steps = tokens >= tokens_per_step ? tokens / tokens_per_step : 1;
  if (steps > kMostLoadCells / layers)
    throw std::invalid_argument(fmt::format(
        "{}: {} steps of {} layers are more than the {} loads a load source may hold; give a "
        "larger batch or a shorter file",
        path, steps, layers, kMostLoadCells));
  // Tokens a step counts (the whole file when it is shorter than a step), and read in all.
  const int64_t step_tokens = std::min(tokens_per_step, tokens);
  const int64_t read_tokens = steps * step_tokens;
  // Ids past this would make more than kMostLoadCells loads over the steps and layers.
  const int64_t most_experts = kMostLoadCells / (steps * layers);
  RecordedExpertLoads loads;
  loads.origin = path;
  int64_t experts = 0;
  std::vector<unsigned char> row(static_cast<std::size_t>(row_bytes));
  for (int64_t t = 0; t < read_tokens; ++t) {
    const int64_t step = t / step_tokens;
    if (static_cast<int64_t>(loads.steps.size()) == step) {
      loads.steps.push_back(step + 1);
      loads.pairs.emplace_back(static_cast<std::size_t>(layers));
    }
    if (!in.read(reinterpret_cast<char*>(row.data()), row_bytes))
      throw std::invalid_argument(fmt::format("{}: cannot read token {}", path, t));
    for (int64_t l = 0; l < layers; ++l) {
      std::vector<int64_t>& counts = loads.pairs.back()[static_cast<std::size_t>(l)];
      for (int64_t k = 0; k < top_k; ++k) {
        const int64_t id = item_at(row.data() + (l * top_k + k) * header.item_bytes, header.kind,
                                   header.item_bytes);
        if (id < 0)
          throw std::invalid_argument(fmt::format(
              "{}: token {}, layer {}, choice {}: expert id {}; ids are 0 or more (drop padded "
              "tokens before saving)",
              path, t, l, k, id));
        if (id >= most_experts)
          throw std::invalid_argument(
              fmt::format("{}: token {}, layer {}, choice {}: expert id {} makes more than the "
                          "{} loads a load source may hold",
                          path, t, l, k, id, kMostLoadCells));
        if (static_cast<int64_t>(counts.size()) <= id)
          counts.resize(static_cast<std::size_t>(id) + 1, 0);
        ++counts[static_cast<std::size_t>(id)];
        experts = std::max(experts, id + 1);
      }
    }
  }
  for (auto& step : loads.pairs)
    for (auto& counts : step) counts.resize(static_cast<std::size_t>(experts), 0);
  return loads;
}

}  // namespace lrmoe
