#include "core/data/tokenizer_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/data/token_source.hpp"
#include "core/system/json_file.hpp"
#include "core/system/sha256.hpp"

namespace lrmoe {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The largest tokenizers (Gemma's 262k entries) write tens of MB; anything past this is not one.
constexpr std::uintmax_t kMostTokenizerBytes = std::uintmax_t{1} << 30;

[[noreturn]] void bad(const fs::path& file, const std::string& what) {
  throw DataError(fmt::format("data.tokenizer {}: {}; name a Hugging Face tokenizer.json",
                              file.string(), what));
}

// The largest id among `ids` (an object's values or an array of {"id": N}), or -1.
int64_t largest_id(const json& ids, const fs::path& file) {
  int64_t largest = -1;
  auto take = [&](const json& id) {
    // Ids past 2^40 are no vocabulary's (and would overflow counting them).
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (int64_t{1} << 40))
      bad(file, "a token id is not one");
    largest = std::max(largest, id.get<int64_t>());
  };
  if (ids.is_object()) {
    for (const auto& item : ids.items()) take(item.value());
  } else if (ids.is_array()) {
    for (const json& entry : ids) {
      // Unigram lists [piece, score] pairs: the id is the index.
      if (entry.is_array()) {
        largest += 1;
        continue;
      }
      if (!entry.is_object() || !entry.contains("id")) bad(file, "an added token has no id");
      take(entry.at("id"));
    }
  }
  return largest;
}

}  // namespace

TokenizerFile read_tokenizer_file(const fs::path& path) {
  std::error_code ec;
  const fs::path file = fs::is_directory(path, ec) ? path / "tokenizer.json" : path;
  json tokenizer;
  try {
    tokenizer = read_json_file(file, kMostTokenizerBytes);
  } catch (const JsonFileError& e) {
    bad(file, e.what());
  }
  if (!tokenizer.is_object() || !tokenizer.contains("model") || !tokenizer["model"].is_object())
    bad(file, "it has no \"model\" object");
  const json& model = tokenizer["model"];
  TokenizerFile read;
  read.path = file.string();
  read.sha256 = sha256_file_hex(file);
  read.model = model.contains("type") && model["type"].is_string()
                   ? model["type"].get<std::string>()
                   : "unknown";
  int64_t largest = model.contains("vocab") ? largest_id(model["vocab"], file) : -1;
  if (tokenizer.contains("added_tokens"))
    largest = std::max(largest, largest_id(tokenizer["added_tokens"], file));
  if (largest < 0) bad(file, "its vocabulary is empty");
  read.vocab_size = largest + 1;
  return read;
}

TokenizerFile check_tokenizer(const DataConfig& data, const DataProvenance& provenance,
                              int64_t model_vocab_size) {
  const TokenizerFile tokenizer = read_tokenizer_file(data.tokenizer);
  if (provenance.corpus && provenance.corpus->tokenizer_sha256 != tokenizer.sha256) {
    throw DataError(fmt::format(
        "data.tokenizer {} (SHA-256 {}) is not the tokenizer the tokens were made with: their "
        "manifest names {} (SHA-256 {}); name that one, or prepare the tokens with this one",
        tokenizer.path, tokenizer.sha256.substr(0, 12), provenance.corpus->tokenizer,
        provenance.corpus->tokenizer_sha256.substr(0, 12)));
  }
  if (tokenizer.vocab_size > model_vocab_size) {
    throw DataError(
        fmt::format("data.tokenizer {} has {} tokens, more than the model's {}; raise "
                    "model.vocab_size to at least {}",
                    tokenizer.path, tokenizer.vocab_size, model_vocab_size, tokenizer.vocab_size));
  }
  return tokenizer;
}

}  // namespace lrmoe
