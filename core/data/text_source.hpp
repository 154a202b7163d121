#pragma once
// The text source: a UTF-8 file, or every regular file under a folder, read as bytes
// (vocabulary 256), so that any corpus trains without a tokenizer.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/config/data_config.hpp"
#include "core/data/token_source.hpp"

namespace lrmoe {

inline constexpr int64_t kByteVocabulary = 256;

// The bytes of `path`: a file, or the files under a folder (recursively, skipping hidden files
// and folders such as .git) concatenated in sorted path order. Throws DataError when the path is
// missing, a file is unreadable, or there are no bytes at all.
std::vector<uint8_t> read_text_corpus(const std::filesystem::path& path);

// Throws DataError (see read_text_corpus and WindowedSource).
std::unique_ptr<TokenSource> open_text_source(const DataConfig& config, uint64_t seed,
                                              int64_t seq_len);

}  // namespace lrmoe
