#pragma once
// Reading a JSON document from a file of bounded size: Hugging Face's config.json, safetensors
// index and tokenizer.json. Each reader words its own error around what went wrong here.

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace lrmoe {

// Why a JSON file could not be read, without the file's name: "cannot read it (No such file or
// directory)", "5000000 bytes, more than 4194304", "not valid JSON (...)".
class JsonFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The document in `file`, at most `most_bytes` long. Never opens what is not a regular file (a
// FIFO would block). Throws JsonFileError.
nlohmann::json read_json_file(const std::filesystem::path& file, std::uintmax_t most_bytes);

}  // namespace lrmoe
