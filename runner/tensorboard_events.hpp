#pragma once
// TensorBoard event files, written to the format TensorBoard reads (no TensorFlow or protobuf
// library needed): a TFRecord file (each record its length, the length's masked CRC-32C, the
// bytes and their masked CRC-32C) of serialized `Event` messages: first one naming the file
// version, then one per scalar with its wall time, step and a `Summary` holding one simple
// value under its tag.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace lrmoe {

// CRC-32C (Castagnoli), as TFRecord checksums its lengths and records.
uint32_t crc32c(std::string_view bytes);

class TensorBoardEventWriter {
 public:
  // Creates `file` (its folder must exist) and writes the file-version event at `wall_time`.
  TensorBoardEventWriter(const std::filesystem::path& file, double wall_time);
  void add_scalar(const std::string& tag, int64_t step, double wall_time, double value);
  // Flushes; throws std::runtime_error naming the file if anything could not be written.
  void close();

 private:
  void write_record(const std::string& data);

  std::filesystem::path file_;
  std::ofstream out_;
};

}  // namespace lrmoe
