#pragma once
// Reading a tokens file's manifest, `<tokens file>.toml`, as scripts/prepare-corpus.sh writes it
// (Note [Data provenance] in docs/notes.md), and checking the tokens against it.

#include <cstdint>
#include <optional>
#include <string>

#include "core/config/data_config.hpp"
#include "core/data/data_provenance.hpp"

namespace lrmoe {

// The manifest beside `config.path`, or nothing when there is none. `tokens` are the file's
// bytes. Throws DataError, naming the manifest's file, line and column, when it is not a
// manifest, or when the tokens are not the ones it describes (count, dtype, SHA-256 `sha256`)
// or the experiment declares another vocabulary than the tokenizer's.
std::optional<CorpusManifest> read_corpus_manifest(const DataConfig& config, int64_t tokens,
                                                   const std::string& sha256);

}  // namespace lrmoe
