#pragma once
// What a run trained on, recorded with it (table run_data; Note [Data provenance] in
// docs/notes.md): the data's own bytes and digest, and, for a tokens file prepared by
// scripts/prepare-corpus.sh, the corpus and tokenizer its manifest names.

#include <cstdint>
#include <optional>
#include <string>

namespace lrmoe {

// A tokens file's manifest, `<tokens file>.toml`: the text the tokens were made from and the
// tokenizer that made them.
struct CorpusManifest {
  std::string name;       // "debian-docs-en"
  int64_t bytes = 0;      // of the text
  std::string sha256;     // of the text
  std::string sources;    // where the text came from: "linux-doc-6.1=6.1.176-1, ..."
  std::string tokenizer;  // "sentencepiece 0.1.97 bpe"
  int64_t tokenizer_vocab = 0;
  std::string tokenizer_sha256;  // of the tokenizer's model file
};

struct DataProvenance {
  std::string kind;    // "synthetic", "text" or "tokens"
  std::string path;    // as configured; empty for synthetic data
  int64_t bytes = 0;   // of the data as read; 0 for synthetic data, generated from the seed
  std::string sha256;  // of those bytes, in the order read; empty for synthetic data
  int64_t tokens = 0;  // training and validation tokens together; 0 for synthetic data
  std::optional<CorpusManifest> corpus;
};

}  // namespace lrmoe
