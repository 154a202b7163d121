#include "runner/tensorboard_events.hpp"

#include <array>
#include <cstring>
#include <stdexcept>

namespace lrmoe {
namespace {

// The Event and Summary fields written (tensorboard/compat/proto/event.proto, summary.proto):
// field number << 3 | wire type (1: 64-bit, 2: length-delimited, 5: 32-bit, 0: varint).
constexpr uint8_t kEventWallTime = 1 << 3 | 1;     // double
constexpr uint8_t kEventStep = 2 << 3 | 0;         // int64
constexpr uint8_t kEventFileVersion = 3 << 3 | 2;  // string
constexpr uint8_t kEventSummary = 5 << 3 | 2;      // Summary
constexpr uint8_t kSummaryValue = 1 << 3 | 2;      // repeated Summary.Value
constexpr uint8_t kValueTag = 1 << 3 | 2;          // string
constexpr uint8_t kValueSimple = 2 << 3 | 5;       // float

const std::array<uint32_t, 256> kCrcTable = [] {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected
    table[i] = c;
  }
  return table;
}();

uint32_t masked_crc(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

template <typename T>
void append_little_endian(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // x86-64 and the GPU hosts are little-endian
  out.append(bytes, sizeof(T));
}

void append_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>(value | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void append_bytes_field(std::string& out, uint8_t key, std::string_view bytes) {
  out.push_back(static_cast<char>(key));
  append_varint(out, bytes.size());
  out.append(bytes);
}

std::string event_head(double wall_time, int64_t step) {
  std::string event;
  event.push_back(static_cast<char>(kEventWallTime));
  append_little_endian(event, wall_time);
  event.push_back(static_cast<char>(kEventStep));
  append_varint(event, static_cast<uint64_t>(step));
  return event;
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (const char b : bytes) crc = kCrcTable[(crc ^ static_cast<uint8_t>(b)) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

TensorBoardEventWriter::TensorBoardEventWriter(const std::filesystem::path& file, double wall_time)
    : file_(file), out_(file, std::ios::binary | std::ios::trunc) {
  if (!out_) throw std::runtime_error("export: cannot write " + file.string());
  std::string event = event_head(wall_time, 0);
  append_bytes_field(event, kEventFileVersion, "brain.Event:2");
  write_record(event);
}

void TensorBoardEventWriter::add_scalar(const std::string& tag, int64_t step, double wall_time,
                                        double value) {
  std::string summary_value;
  append_bytes_field(summary_value, kValueTag, tag);
  summary_value.push_back(static_cast<char>(kValueSimple));
  append_little_endian(summary_value, static_cast<float>(value));
  std::string summary;
  append_bytes_field(summary, kSummaryValue, summary_value);
  std::string event = event_head(wall_time, step);
  append_bytes_field(event, kEventSummary, summary);
  write_record(event);
}

void TensorBoardEventWriter::write_record(const std::string& data) {
  std::string length;
  append_little_endian(length, static_cast<uint64_t>(data.size()));
  std::string record = length;
  append_little_endian(record, masked_crc(length));
  record += data;
  append_little_endian(record, masked_crc(data));
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
}

void TensorBoardEventWriter::close() {
  out_.close();
  if (!out_) throw std::runtime_error("export: cannot write " + file_.string());
}

}  // namespace lrmoe
