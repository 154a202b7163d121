#pragma once
// The TokenSource shared by the text and token-file sources: both reduce to a flat token array
// whose last val_fraction is held out. A training batch takes random windows of seq_len + 1
// tokens from the training split; an evaluation batch takes windows from the validation split
// at positions fixed by its index.

#include <cstdint>
#include <memory>
#include <string>

#include "core/data/seeded_rng.hpp"
#include "core/data/token_array.hpp"
#include "core/data/token_source.hpp"

namespace lrmoe {

class WindowedSource final : public TokenSource {
 public:
  // `provenance.path` names the data in error messages; `description` starts describe().
  // Throws DataError when either split is shorter than one window.
  WindowedSource(std::unique_ptr<const TokenArray> tokens, int64_t vocab_size,
                 DataProvenance provenance, std::string description, double val_fraction,
                 uint64_t seed, int64_t seq_len);

  int64_t vocab_size() const override { return vocab_size_; }
  Batch train_batch(int64_t step, int64_t micro, int64_t batch_size,
                    RowShard shard = {}) const override;
  Batch val_batch(int64_t index, int64_t batch_size, RowShard shard = {}) const override;
  std::string describe() const override;
  DataProvenance provenance() const override { return provenance_; }

  // The first validation token; tokens before it are the training split.
  int64_t train_size() const { return train_size_; }

 private:
  // Each row's window starts at split_begin + a uniform draw seeded by (stream, a, b, row).
  Batch batch(SeedStream stream, int64_t a, int64_t b, int64_t split_begin, int64_t split_size,
              int64_t batch_size, RowShard shard) const;

  std::unique_ptr<const TokenArray> tokens_;
  int64_t vocab_size_;
  DataProvenance provenance_;
  std::string description_;
  uint64_t seed_;
  int64_t seq_len_;
  int64_t train_size_;
};

}  // namespace lrmoe
