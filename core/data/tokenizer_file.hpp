#pragma once
// data.tokenizer: the Hugging Face tokenizer.json a run's tokens were made with. Its SHA-256 and
// vocabulary are recorded with the run (Note [Data provenance] in docs/notes.md); a corpus
// manifest that names another tokenizer, or a vocabulary the model cannot hold, is refused.

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/config/data_config.hpp"
#include "core/data/data_provenance.hpp"

namespace lrmoe {

struct TokenizerFile {
  std::string path;
  std::string sha256;      // of the file's bytes
  std::string model;       // its model's type: "BPE", "Unigram", "WordPiece", ...
  int64_t vocab_size = 0;  // the largest id of its vocabulary and added tokens, plus one
};

// Reads `path` (a tokenizer.json, or a folder holding one). Throws DataError naming it.
TokenizerFile read_tokenizer_file(const std::filesystem::path& path);

// The run's tokenizer, checked: against the corpus manifest's tokenizer (`provenance`), and its
// vocabulary against the model's. Throws DataError naming data.tokenizer and what to do.
TokenizerFile check_tokenizer(const DataConfig& data, const DataProvenance& provenance,
                              int64_t model_vocab_size);

}  // namespace lrmoe
