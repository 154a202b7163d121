#include "core/data/windowed_source.hpp"

#include <fmt/format.h>

#include <utility>

#include "core/data/window_batch.hpp"

namespace lrmoe {
namespace {

// The seed of the validation windows: not the experiment's, so that every seed is evaluated on
// the same held-out tokens (Note [Held-out split]).
constexpr uint64_t kValidationSeed = 0;

}  // namespace

WindowedSource::WindowedSource(std::unique_ptr<const TokenArray> tokens, int64_t vocab_size,
                               DataProvenance provenance, std::string description,
                               double val_fraction, uint64_t seed, int64_t seq_len)
    : tokens_(std::move(tokens)),
      vocab_size_(vocab_size),
      provenance_(std::move(provenance)),
      description_(std::move(description)),
      seed_(seed),
      seq_len_(seq_len) {
  const std::string& path = provenance_.path;
  const int64_t total = tokens_->size();
  const int64_t window = seq_len + 1;
  split_ = held_out_split(total, val_fraction, window);
  if (split_.validation.window_starts() == 0) {
    throw DataError(fmt::format(
        "data.path '{}' has {} tokens; the validation split (val_fraction {}) has {}, fewer than "
        "seq_len+1 = {}: use a longer file, a larger data.val_fraction or a shorter "
        "train.seq_len",
        path, total, val_fraction, split_.validation.tokens(), window));
  }
  if (split_.train.window_starts() == 0) {
    throw DataError(fmt::format(
        "data.path '{}' has {} tokens; the training split (all but val_fraction {}) has {}, "
        "fewer than seq_len+1 = {}: use a longer file, a smaller data.val_fraction or a shorter "
        "train.seq_len",
        path, total, val_fraction, split_.train.tokens(), window));
  }
}

Batch WindowedSource::batch(uint64_t seed, SeedStream stream, int64_t a, int64_t b,
                            const SplitSegments& segments, int64_t batch_size,
                            RowShard shard) const {
  const int64_t window = seq_len_ + 1;
  const int64_t first = shard.first(batch_size), rows = shard.rows(batch_size);
  torch::Tensor windows = torch::empty({rows, window}, torch::kInt64);
  int64_t* data = windows.data_ptr<int64_t>();
  for (int64_t row = 0; row < rows; ++row) {
    SplitMix64 rng(stream_seed(seed, stream, static_cast<uint64_t>(a), static_cast<uint64_t>(b),
                               static_cast<uint64_t>(first + row)));
    tokens_->copy(segments.start(rng.below(segments.window_starts())), window, data + row * window);
  }
  return batch_from_windows(windows);
}

Batch WindowedSource::train_batch(int64_t step, int64_t micro, int64_t batch_size,
                                  RowShard shard) const {
  return batch(seed_, SeedStream::Train, step, micro, split_.train, batch_size, shard);
}

Batch WindowedSource::val_batch(int64_t index, int64_t batch_size, RowShard shard) const {
  return batch(kValidationSeed, SeedStream::Validation, index, 0, split_.validation, batch_size,
               shard);
}

std::string WindowedSource::describe() const {
  return fmt::format("{}; {} training and {} validation tokens ({} held-out segments)",
                     description_, split_.train.tokens(), split_.validation.tokens(),
                     split_.validation.segments().size());
}

}  // namespace lrmoe
