#pragma once
// The TokenSource shared by the text and token-file sources: both reduce to a flat token array
// of which val_fraction is held out (Note [Held-out split]). A training batch takes random
// windows of seq_len + 1 tokens from the training split, drawn from the seed; an evaluation
// batch takes windows from the validation split at positions fixed by its index alone, the same
// for every seed, so that runs of different seeds are scored on the same tokens.

#include <cstdint>
#include <memory>
#include <string>

#include "core/data/held_out_split.hpp"
#include "core/data/seeded_rng.hpp"
#include "core/data/token_array.hpp"
#include "core/data/token_source.hpp"

namespace lrmoe {

class WindowedSource final : public TokenSource {
 public:
  // `provenance.path` names the data in error messages; `description` starts describe().
  // Throws DataError when either split holds no window.
  WindowedSource(std::unique_ptr<const TokenArray> tokens, int64_t vocab_size,
                 DataProvenance provenance, std::string description, double val_fraction,
                 uint64_t seed, int64_t seq_len);

  int64_t vocab_size() const override { return vocab_size_; }
  Batch train_batch(int64_t step, int64_t micro, int64_t batch_size,
                    RowShard shard = {}) const override;
  Batch val_batch(int64_t index, int64_t batch_size, RowShard shard = {}) const override;
  std::string describe() const override;
  DataProvenance provenance() const override { return provenance_; }

 private:
  // Each row's window starts at a uniform draw among `segments`' window starts, seeded by
  // (seed, stream, a, b, row).
  Batch batch(uint64_t seed, SeedStream stream, int64_t a, int64_t b, const SplitSegments& segments,
              int64_t batch_size, RowShard shard) const;

  std::unique_ptr<const TokenArray> tokens_;
  int64_t vocab_size_;
  DataProvenance provenance_;
  std::string description_;
  uint64_t seed_;
  int64_t seq_len_;
  HeldOutSplit split_;
};

}  // namespace lrmoe
