#pragma once
// The tiny model as an in-process experiment, small enough that a test trains it in well under a
// second: 4 sequences of 16 tokens, 4 steps, an evaluation every 2.

#include <cstdint>

#include "core/config/experiment.hpp"
#include "core/config/model_presets.hpp"

namespace lrmoe_test {

inline lrmoe::Experiment tiny_training(uint64_t seed) {
  lrmoe::Experiment e;
  e.experiment.seed = seed;
  e.model = *lrmoe::find_preset("tiny-moe");
  e.data.vocab_size = 128;
  e.data.topic_vocab = 32;
  e.train.batch_size = 4;
  e.train.seq_len = 16;
  e.train.max_steps = 4;
  e.train.warmup_steps = 1;
  e.train.eval_every = 2;
  e.train.eval_batches = 1;
  return e;
}

}  // namespace lrmoe_test
