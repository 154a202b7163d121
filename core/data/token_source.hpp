#pragma once
// Where training and evaluation tokens come from. Three kinds (DataConfig::kind):
//  - synthetic: a mixture of topic-specific Markov sources generated from the seed, with a known
//    entropy floor (see synthetic_source.hpp);
//  - text: a UTF-8 file or folder read as bytes (vocabulary 256);
//  - tokens: a flat binary file of uint16 or uint32 token ids (nanoGPT / Megatron style).
// Every batch is a pure function of (seed, split, step, micro-batch): training is reproducible
// bit for bit and independent of torch's global random state.

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/config/data_config.hpp"
#include "core/data/data_provenance.hpp"

namespace lrmoe {

// A user-caused data problem (missing, empty or too-short file, token id outside the
// vocabulary). The message names the file and says what to do.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Batch {
  torch::Tensor inputs;   // [batch, seq_len] int64, on the CPU as read
  torch::Tensor targets;  // [batch, seq_len] int64, inputs shifted by one

  // The batch on the training device (a copy that does not wait for the host there).
  Batch to(const torch::Device& device) const {
    return {inputs.to(device, /*non_blocking=*/true), targets.to(device, /*non_blocking=*/true)};
  }
};

// The rows of a batch one process of a data-parallel run reads: rows [index * B / count,
// (index + 1) * B / count) of the batch of B rows. Each row is drawn from its own seed, so the
// shards of P processes are exactly the rows one process would read, in order (Note [Exact
// multi-process plan] in docs/notes.md).
struct RowShard {
  int64_t index = 0;
  int64_t count = 1;

  int64_t first(int64_t batch_size) const { return index * batch_size / count; }
  int64_t rows(int64_t batch_size) const {
    return (index + 1) * batch_size / count - first(batch_size);
  }
};

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual int64_t vocab_size() const = 0;
  // Training micro-batch `micro` of optimizer step `step`.
  virtual Batch train_batch(int64_t step, int64_t micro, int64_t batch_size,
                            RowShard shard = {}) const = 0;
  // Evaluation batch `index`; the same index always gives the same batch.
  virtual Batch val_batch(int64_t index, int64_t batch_size, RowShard shard = {}) const = 0;
  // One line for logs: kind, path, sizes.
  virtual std::string describe() const = 0;
  // What the run trains on, to record with it (Note [Data provenance]).
  virtual DataProvenance provenance() const = 0;
  // Per-token cross-entropy floor in nats, where the source knows it.
  virtual std::optional<double> entropy_floor() const { return std::nullopt; }
};

// Validates the configuration against the files and builds the source. Throws DataError.
std::unique_ptr<TokenSource> make_token_source(const DataConfig& config, uint64_t seed,
                                               int64_t seq_len);

}  // namespace lrmoe
