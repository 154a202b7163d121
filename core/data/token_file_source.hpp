#pragma once
// The token-file source: a flat binary file of little-endian uint16 or uint32 token ids
// (data.token_dtype), as written by nanoGPT- or Megatron-style preprocessing, memory-mapped and
// checked once against the declared vocabulary (data.vocab_size).

#include <cstdint>
#include <memory>

#include "core/config/data_config.hpp"
#include "core/data/token_source.hpp"

namespace lrmoe {

// Throws DataError when the file is missing, unreadable, empty, not a whole number of tokens,
// holds an id outside the vocabulary, or is too short for the splits.
std::unique_ptr<TokenSource> open_token_file_source(const DataConfig& config, uint64_t seed,
                                                    int64_t seq_len);

}  // namespace lrmoe
