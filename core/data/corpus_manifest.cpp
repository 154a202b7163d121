#include "core/data/corpus_manifest.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "core/config/experiment_loader.hpp"
#include "core/config/toml_document.hpp"
#include "core/data/token_source.hpp"

namespace lrmoe {
namespace {

// The manifest's values, each read with its place for the message when it is wrong.
class ManifestReader {
 public:
  ManifestReader(const toml::table& document, std::string file)
      : document_(document), file_(std::move(file)) {}

  const toml::node& node(const char* section, const char* key) const {
    const toml::node* value = document_.at_path(std::string(section) + "." + key).node();
    if (value == nullptr) {
      throw DataError(
          fmt::format("{}: no {}.{}: a tokens file's manifest is written by "
                      "scripts/prepare-corpus.sh; run it again, or remove the manifest",
                      file_, section, key));
    }
    return *value;
  }
  std::string text(const char* section, const char* key) const {
    const toml::node& value = node(section, key);
    if (!value.is_string()) throw wrong(value, section, key, "a string");
    return value.as_string()->get();
  }
  int64_t count(const char* section, const char* key) const {
    const toml::node& value = node(section, key);
    if (!value.is_integer() || value.as_integer()->get() < 0)
      throw wrong(value, section, key, "a whole number >= 0");
    return value.as_integer()->get();
  }
  std::string list(const char* section, const char* key) const {
    const toml::node& value = node(section, key);
    const toml::array* items = value.as_array();
    if (items == nullptr) throw wrong(value, section, key, "an array of strings");
    std::string joined;
    for (const toml::node& item : *items) {
      if (!item.is_string()) throw wrong(item, section, key, "an array of strings");
      joined += (joined.empty() ? "" : ", ") + item.as_string()->get();
    }
    return joined;
  }
  // A manifest that disagrees with the data it sits beside.
  DataError mismatch(const char* section, const char* key, const std::string& why) const {
    return DataError(fmt::format("{}: {}.{}: {}", place_in(file_, node(section, key).source()),
                                 section, key, why));
  }

 private:
  DataError wrong(const toml::node& value, const char* section, const char* key,
                  const char* expected) const {
    return DataError(fmt::format("{}: {}.{} must be {}", place_in(file_, value.source()), section,
                                 key, expected));
  }

  const toml::table& document_;
  std::string file_;
};

}  // namespace

std::optional<CorpusManifest> read_corpus_manifest(const DataConfig& config, int64_t tokens,
                                                   const std::string& sha256) {
  const std::string file = config.path + ".toml";
  std::error_code error;
  if (!std::filesystem::exists(file, error)) return std::nullopt;
  toml::table document;
  try {
    document = parse_toml(read_text_file(file, file), file);
  } catch (const ConfigError& bad) {
    throw DataError(bad.what());
  }
  const ManifestReader manifest(document, file);
  const char* dtype = config.token_dtype == TokenDtype::Uint16 ? "uint16" : "uint32";
  if (manifest.text("tokens", "dtype") != dtype) {
    throw manifest.mismatch("tokens", "dtype",
                            fmt::format("the tokens are {}, but data.token_dtype = \"{}\"; set "
                                        "data.token_dtype to the manifest's",
                                        manifest.text("tokens", "dtype"), dtype));
  }
  if (manifest.count("tokens", "count") != tokens || manifest.text("tokens", "sha256") != sha256) {
    throw manifest.mismatch(
        "tokens", "sha256",
        fmt::format("'{}' ({} tokens, SHA-256 {}) is not the file this manifest describes; "
                    "prepare it again (scripts/prepare-corpus.sh)",
                    config.path, tokens, sha256));
  }
  CorpusManifest corpus;
  corpus.name = manifest.text("corpus", "name");
  corpus.bytes = manifest.count("corpus", "bytes");
  corpus.sha256 = manifest.text("corpus", "sha256");
  corpus.sources = manifest.list("corpus", "sources");
  corpus.tokenizer =
      manifest.text("tokenizer", "library") + " " + manifest.text("tokenizer", "model");
  corpus.tokenizer_vocab = manifest.count("tokenizer", "vocab_size");
  corpus.tokenizer_sha256 = manifest.text("tokenizer", "sha256");
  // A larger declared vocabulary would train embeddings no token uses; a smaller one could not
  // hold the tokens' ids.
  if (corpus.tokenizer_vocab != config.vocab_size) {
    throw manifest.mismatch(
        "tokenizer", "vocab_size",
        fmt::format("the tokenizer has {} tokens, but data.vocab_size = {}; "
                    "set data.vocab_size = {}",
                    corpus.tokenizer_vocab, config.vocab_size, corpus.tokenizer_vocab));
  }
  return corpus;
}

}  // namespace lrmoe
