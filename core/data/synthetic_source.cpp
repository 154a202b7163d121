#include "core/data/synthetic_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/data/window_batch.hpp"

namespace lrmoe {
namespace {

void check_sizes(const DataConfig& config) {
  auto fail = [](const std::string& message) { throw DataError("synthetic data: " + message); };
  if (config.vocab_size < 2) {
    fail(fmt::format("data.vocab_size = {} is too small: use at least 2", config.vocab_size));
  }
  if (config.topics < 1) {
    fail(fmt::format("data.topics = {}: use at least one topic", config.topics));
  }
  if (config.topic_vocab < 2 || config.topic_vocab > config.vocab_size) {
    fail(
        fmt::format("data.topic_vocab = {} must be between 2 and data.vocab_size = {}: "
                    "change data.topic_vocab or data.vocab_size",
                    config.topic_vocab, config.vocab_size));
  }
  // Successors exclude the token itself, so a topic offers at most topic_vocab - 1.
  if (config.branching < 1 || config.branching > config.topic_vocab - 1) {
    fail(
        fmt::format("data.branching = {} must be between 1 and data.topic_vocab - 1 = {}: "
                    "lower data.branching or raise data.topic_vocab",
                    config.branching, config.topic_vocab - 1));
  }
}

// Moves a uniformly random selection of `count` elements of `items` to its front (a partial
// Fisher-Yates shuffle), in random order.
template <typename T>
void choose_front(std::vector<T>& items, int64_t count, SplitMix64& rng) {
  const auto size = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < count; ++i) {
    std::swap(items[static_cast<size_t>(i)], items[static_cast<size_t>(i + rng.below(size - i))]);
  }
}

// Topic `topic`'s chain. Its states are a random subset of the vocabulary in random order.
// State s always moves on to s + 1 (cyclically), which makes the chain irreducible; its other
// branching - 1 successors are distinct random states other than s itself.
SyntheticTopic build_topic(const DataConfig& config, uint64_t seed, int64_t topic) {
  SplitMix64 rng(stream_seed(seed, SeedStream::Structure, static_cast<uint64_t>(topic), 0, 0));
  const int64_t states = config.topic_vocab;
  const int64_t branching = config.branching;

  SyntheticTopic result;
  std::vector<int64_t> vocabulary(static_cast<size_t>(config.vocab_size));
  std::iota(vocabulary.begin(), vocabulary.end(), int64_t{0});
  choose_front(vocabulary, states, rng);
  result.tokens.assign(vocabulary.begin(), vocabulary.begin() + states);

  MarkovChain& chain = result.chain;
  chain.states = states;
  chain.branching = branching;
  chain.successors.reserve(static_cast<size_t>(states * branching));
  chain.probabilities.reserve(static_cast<size_t>(states * branching));
  std::vector<int32_t> others;
  for (int64_t s = 0; s < states; ++s) {
    const auto cycle_next = static_cast<int32_t>((s + 1) % states);
    chain.successors.push_back(cycle_next);
    others.clear();
    for (int64_t candidate = 0; candidate < states; ++candidate) {
      if (candidate != s && candidate != cycle_next) {
        others.push_back(static_cast<int32_t>(candidate));
      }
    }
    choose_front(others, branching - 1, rng);
    chain.successors.insert(chain.successors.end(), others.begin(), others.begin() + branching - 1);

    // Exponential weights (a flat Dirichlet draw) make the probabilities clearly unequal; the
    // offset keeps every successor, the cycle edge included, likely enough that the chain
    // mixes quickly and every transition shows up in training data.
    std::vector<double> weights(static_cast<size_t>(branching));
    for (double& weight : weights) weight = 0.1 - std::log1p(-rng.uniform());
    const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    for (double weight : weights) chain.probabilities.push_back(weight / total);
  }

  result.stationary = stationary_distribution(chain);
  result.entropy_rate = entropy_rate(chain, result.stationary);
  result.start_cumulative = cumulative(result.stationary.data(), states);
  result.successor_cumulative.reserve(static_cast<size_t>(states * branching));
  for (int64_t s = 0; s < states; ++s) {
    const std::vector<double> row =
        cumulative(&chain.probabilities[static_cast<size_t>(s * branching)], branching);
    result.successor_cumulative.insert(result.successor_cumulative.end(), row.begin(), row.end());
  }
  return result;
}

// The index drawn by `u` from a cumulative table: the first entry above u.
int64_t draw(const double* cumulative_begin, int64_t count, double u) {
  return std::upper_bound(cumulative_begin, cumulative_begin + count, u) - cumulative_begin;
}

}  // namespace

SyntheticSource::SyntheticSource(const DataConfig& config, uint64_t seed, int64_t seq_len)
    : vocab_size_(config.vocab_size),
      topic_vocab_(config.topic_vocab),
      branching_(config.branching),
      seq_len_(seq_len),
      seed_(seed) {
  check_sizes(config);
  topics_.reserve(static_cast<size_t>(config.topics));
  double rate_sum = 0.0;
  for (int64_t topic = 0; topic < config.topics; ++topic) {
    topics_.push_back(build_topic(config, seed, topic));
    rate_sum += topics_.back().entropy_rate;
  }
  // Topics are drawn uniformly, so the floor is their plain average.
  entropy_floor_ = rate_sum / static_cast<double>(config.topics);
}

int64_t SyntheticSource::write_document(uint64_t document_seed, int64_t* out) const {
  SplitMix64 rng(document_seed);
  const int64_t topic_index = rng.below(static_cast<int64_t>(topics_.size()));
  const SyntheticTopic& topic = topics_[static_cast<size_t>(topic_index)];
  // Starting from the stationary distribution makes the next-token entropy equal the entropy
  // rate at every position of the document, not only in the long run.
  int64_t state = draw(topic.start_cumulative.data(), topic_vocab_, rng.uniform());
  out[0] = topic.tokens[static_cast<size_t>(state)];
  for (int64_t position = 1; position <= seq_len_; ++position) {
    const int64_t slot = draw(&topic.successor_cumulative[static_cast<size_t>(state * branching_)],
                              branching_, rng.uniform());
    state = topic.chain.successor(state, slot);
    out[position] = topic.tokens[static_cast<size_t>(state)];
  }
  return topic_index;
}

Batch SyntheticSource::batch(SeedStream stream, int64_t a, int64_t b, int64_t batch_size,
                             RowShard shard) const {
  const int64_t first = shard.first(batch_size), rows = shard.rows(batch_size);
  torch::Tensor windows = torch::empty({rows, seq_len_ + 1}, torch::kInt64);
  int64_t* data = windows.data_ptr<int64_t>();
  for (int64_t row = 0; row < rows; ++row) {
    // One seed per row: a row does not depend on the batch size it was drawn in.
    write_document(stream_seed(seed_, stream, static_cast<uint64_t>(a), static_cast<uint64_t>(b),
                               static_cast<uint64_t>(first + row)),
                   data + row * (seq_len_ + 1));
  }
  return batch_from_windows(windows);
}

Batch SyntheticSource::train_batch(int64_t step, int64_t micro, int64_t batch_size,
                                   RowShard shard) const {
  return batch(SeedStream::Train, step, micro, batch_size, shard);
}

Batch SyntheticSource::val_batch(int64_t index, int64_t batch_size, RowShard shard) const {
  return batch(SeedStream::Validation, index, 0, batch_size, shard);
}

std::string SyntheticSource::describe() const {
  return fmt::format(
      "synthetic: vocabulary {}, {} topics of {} tokens, branching {}; entropy floor {:.4f} "
      "nats/token (a uniform guess scores log {} = {:.4f})",
      vocab_size_, topics_.size(), topic_vocab_, branching_, entropy_floor_, vocab_size_,
      std::log(static_cast<double>(vocab_size_)));
}

}  // namespace lrmoe
