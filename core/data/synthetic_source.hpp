#pragma once
// The synthetic source: a mixture of topic-specific Markov chains over one shared vocabulary,
// built from the seed. Each topic uses its own random subset of the vocabulary (subsets overlap,
// so a single token does not reveal the topic; the context does) and, within it, moves from
// every token to a few successors with unequal probabilities. A model does best by inferring
// the topic and applying that topic's transition table, which is what experts can specialise
// in. Because the chains are known, so is the loss floor: the entropy rate of the chains.
//
// What it fails: the sensitivity gate (Note [Sensitivity gate]). On the tiny model, dropping
// half of the routed pairs, or all of them, costs steps to target within the seeds' noise: the
// chains are learned without the experts, so a policy comparison on this data measures the cost
// of each step, not convergence.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config/data_config.hpp"
#include "core/data/markov_chain.hpp"
#include "core/data/seeded_rng.hpp"
#include "core/data/token_source.hpp"

namespace lrmoe {

struct SyntheticTopic {
  std::vector<int64_t> tokens;               // vocabulary id of each chain state
  MarkovChain chain;                         // transitions between chain states
  std::vector<double> stationary;            // stationary distribution of `chain`
  double entropy_rate = 0.0;                 // nats per token, knowing the topic
  std::vector<double> start_cumulative;      // sampling table for the first state
  std::vector<double> successor_cumulative;  // [states * branching] sampling tables
};

class SyntheticSource final : public TokenSource {
 public:
  // Throws DataError when the sizes in `config` cannot form the chains.
  SyntheticSource(const DataConfig& config, uint64_t seed, int64_t seq_len);

  int64_t vocab_size() const override { return vocab_size_; }
  Batch train_batch(int64_t step, int64_t micro, int64_t batch_size,
                    RowShard shard = {}) const override;
  Batch val_batch(int64_t index, int64_t batch_size, RowShard shard = {}) const override;
  std::string describe() const override;
  // Generated from the seed and the [data] settings, which the run's resolved experiment holds.
  DataProvenance provenance() const override { return {"synthetic", "", 0, "", 0, std::nullopt}; }
  // The average over topics of each topic's entropy rate.
  std::optional<double> entropy_floor() const override { return entropy_floor_; }

  const std::vector<SyntheticTopic>& topics() const { return topics_; }

  // Writes one document of seq_len + 1 vocabulary ids drawn from `document_seed` and returns
  // its topic. Public so that tests can check the floor against sampled documents.
  int64_t write_document(uint64_t document_seed, int64_t* out) const;

 private:
  Batch batch(SeedStream stream, int64_t a, int64_t b, int64_t batch_size, RowShard shard) const;

  int64_t vocab_size_;
  int64_t topic_vocab_;
  int64_t branching_;
  int64_t seq_len_;
  uint64_t seed_;
  std::vector<SyntheticTopic> topics_;
  double entropy_floor_ = 0.0;
};

}  // namespace lrmoe
