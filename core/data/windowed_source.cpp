#include "core/data/windowed_source.hpp"

#include <fmt/format.h>

#include <utility>

#include "core/data/window_batch.hpp"

namespace lrmoe {

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
  const auto val_size = static_cast<int64_t>(static_cast<double>(total) * val_fraction);
  train_size_ = total - val_size;
  const int64_t window = seq_len + 1;
  if (val_size < window) {
    throw DataError(fmt::format(
        "data.path '{}' has {} tokens; the validation split (val_fraction {}) has {}, fewer than "
        "seq_len+1 = {}: use a longer file, a larger data.val_fraction or a shorter "
        "train.seq_len",
        path, total, val_fraction, val_size, window));
  }
  if (train_size_ < window) {
    throw DataError(fmt::format(
        "data.path '{}' has {} tokens; the training split (all but val_fraction {}) has {}, "
        "fewer than seq_len+1 = {}: use a longer file, a smaller data.val_fraction or a shorter "
        "train.seq_len",
        path, total, val_fraction, train_size_, window));
  }
}

Batch WindowedSource::batch(SeedStream stream, int64_t a, int64_t b, int64_t split_begin,
                            int64_t split_size, int64_t batch_size, RowShard shard) const {
  const int64_t window = seq_len_ + 1;
  const int64_t start_choices = split_size - window + 1;
  const int64_t first = shard.first(batch_size), rows = shard.rows(batch_size);
  torch::Tensor windows = torch::empty({rows, window}, torch::kInt64);
  int64_t* data = windows.data_ptr<int64_t>();
  for (int64_t row = 0; row < rows; ++row) {
    SplitMix64 rng(stream_seed(seed_, stream, static_cast<uint64_t>(a), static_cast<uint64_t>(b),
                               static_cast<uint64_t>(first + row)));
    tokens_->copy(split_begin + rng.below(start_choices), window, data + row * window);
  }
  return batch_from_windows(windows);
}

Batch WindowedSource::train_batch(int64_t step, int64_t micro, int64_t batch_size,
                                  RowShard shard) const {
  return batch(SeedStream::Train, step, micro, 0, train_size_, batch_size, shard);
}

Batch WindowedSource::val_batch(int64_t index, int64_t batch_size, RowShard shard) const {
  return batch(SeedStream::Validation, index, 0, train_size_, tokens_->size() - train_size_,
               batch_size, shard);
}

std::string WindowedSource::describe() const {
  return fmt::format("{}; {} training and {} validation tokens", description_, train_size_,
                     tokens_->size() - train_size_);
}

}  // namespace lrmoe
