// The data sources: synthetic Markov topics (determinism, shapes, entropy floor), text files and
// folders, binary token files, and the errors a user can cause.

#include <torch/torch.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/data/held_out_split.hpp"
#include "core/data/markov_chain.hpp"
#include "core/data/seeded_rng.hpp"
#include "core/data/synthetic_source.hpp"
#include "core/data/text_source.hpp"
#include "core/data/token_source.hpp"
#include "support/temp_folder.hpp"

namespace fs = std::filesystem;
using namespace lrmoe;
using lrmoe_test::TempFolder;

namespace {

// `count` pseudo-random lower-case letters: windows of a few letters occur only once, so a
// window locates itself in the text.
std::string random_letters(int64_t count, uint64_t seed) {
  SplitMix64 rng(seed);
  std::string text;
  for (int64_t i = 0; i < count; ++i) text.push_back(static_cast<char>('a' + rng.below(26)));
  return text;
}

// `values` as little-endian words of `width` bytes.
std::string little_endian(const std::vector<int64_t>& values, int width) {
  std::string bytes;
  for (int64_t value : values) {
    for (int i = 0; i < width; ++i) bytes.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
  return bytes;
}

bool same_batch(const Batch& a, const Batch& b) {
  return torch::equal(a.inputs, b.inputs) && torch::equal(a.targets, b.targets);
}

// Row `row` of the batch as the window of seq_len + 1 tokens it was cut from.
std::vector<int64_t> window_of(const Batch& batch, int64_t row) {
  const torch::Tensor window =
      torch::cat({batch.inputs[row], batch.targets[row].narrow(0, batch.targets.size(1) - 1, 1)});
  return std::vector<int64_t>(window.data_ptr<int64_t>(),
                              window.data_ptr<int64_t>() + window.numel());
}

void check_batch_form(const Batch& batch, int64_t batch_size, int64_t seq_len, int64_t vocab) {
  REQUIRE(batch.inputs.sizes() == torch::IntArrayRef({batch_size, seq_len}));
  REQUIRE(batch.targets.sizes() == torch::IntArrayRef({batch_size, seq_len}));
  CHECK(batch.inputs.scalar_type() == torch::kInt64);
  CHECK(batch.targets.scalar_type() == torch::kInt64);
  CHECK(torch::equal(batch.inputs.narrow(1, 1, seq_len - 1),
                     batch.targets.narrow(1, 0, seq_len - 1)));
  CHECK(batch.inputs.min().item<int64_t>() >= 0);
  CHECK(batch.targets.min().item<int64_t>() >= 0);
  CHECK(batch.inputs.max().item<int64_t>() < vocab);
  CHECK(batch.targets.max().item<int64_t>() < vocab);
}

DataConfig file_config(DataKind kind, const fs::path& path) {
  DataConfig config;
  config.kind = kind;
  config.path = path.string();
  return config;
}

// The message of the DataError that building a source from `config` raises.
std::string data_error(const DataConfig& config, int64_t seq_len = 64) {
  try {
    make_token_source(config, 0, seq_len);
  } catch (const DataError& error) {
    return error.what();
  }
  FAIL("no DataError for data.path '" << config.path << "'");
  return {};
}

}  // namespace

TEST_CASE("synthetic batches are a pure function of seed, stream, step, micro-batch and row",
          "[data]") {
  const DataConfig config;
  const auto source = make_token_source(config, 7, 64);
  const auto twin = make_token_source(config, 7, 64);
  const Batch batch = source->train_batch(3, 1, 16);

  CHECK(same_batch(batch, twin->train_batch(3, 1, 16)));
  CHECK(same_batch(batch, source->train_batch(3, 1, 16)));
  CHECK_FALSE(same_batch(batch, source->train_batch(4, 1, 16)));
  CHECK_FALSE(same_batch(batch, source->train_batch(3, 0, 16)));
  CHECK_FALSE(same_batch(batch, make_token_source(config, 8, 64)->train_batch(3, 1, 16)));

  // A row does not depend on the size of the batch it is drawn in.
  const Batch half = source->train_batch(3, 1, 8);
  CHECK(torch::equal(half.inputs, batch.inputs.narrow(0, 0, 8)));

  const Batch val = source->val_batch(3, 16);
  CHECK(same_batch(val, twin->val_batch(3, 16)));
  CHECK_FALSE(same_batch(val, source->val_batch(4, 16)));
  CHECK_FALSE(same_batch(val, batch));
  CHECK_FALSE(same_batch(source->val_batch(0, 16), source->train_batch(0, 0, 16)));
}

TEST_CASE("synthetic batches have the declared shape, dtype, shift and vocabulary", "[data]") {
  const auto source = make_token_source(DataConfig{}, 1, 64);
  CHECK(source->vocab_size() == 512);
  check_batch_form(source->train_batch(0, 0, 16), 16, 64, 512);
  check_batch_form(source->val_batch(0, 16), 16, 64, 512);

  DataConfig small;
  small.vocab_size = 40;
  small.topics = 3;
  small.topic_vocab = 10;
  small.branching = 3;
  const auto small_source = make_token_source(small, 1, 5);
  check_batch_form(small_source->train_batch(2, 0, 7), 7, 5, 40);
  check_batch_form(small_source->val_batch(2, 7), 7, 5, 40);
}

TEST_CASE("synthetic topics are overlapping vocabulary subsets with irreducible skewed chains",
          "[data]") {
  const DataConfig config;
  const SyntheticSource source(config, 5, 64);
  REQUIRE(source.topics().size() == 8);

  std::set<int64_t> all_tokens;
  int64_t overlapping_pairs = 0;
  for (size_t z = 0; z < source.topics().size(); ++z) {
    const SyntheticTopic& topic = source.topics()[z];
    const std::set<int64_t> tokens(topic.tokens.begin(), topic.tokens.end());
    CHECK(tokens.size() == 64);
    CHECK(*tokens.rbegin() < 512);
    all_tokens.insert(tokens.begin(), tokens.end());
    for (size_t other = z + 1; other < source.topics().size(); ++other) {
      const auto& other_tokens = source.topics()[other].tokens;
      for (int64_t token : other_tokens) {
        if (tokens.count(token) != 0) {
          ++overlapping_pairs;
          break;
        }
      }
    }

    const MarkovChain& chain = topic.chain;
    bool some_row_unequal = false;
    for (int64_t s = 0; s < chain.states; ++s) {
      std::set<int32_t> successors;
      double row_sum = 0.0;
      for (int64_t slot = 0; slot < chain.branching; ++slot) {
        successors.insert(chain.successor(s, slot));
        row_sum += chain.probability(s, slot);
        if (std::abs(chain.probability(s, slot) - 1.0 / chain.branching) > 0.05) {
          some_row_unequal = true;
        }
      }
      CHECK(successors.size() == static_cast<size_t>(chain.branching));
      CHECK(successors.count(static_cast<int32_t>(s)) == 0);
      CHECK(row_sum == Approx(1.0).margin(1e-12));
    }
    CHECK(some_row_unequal);
  }
  // Topics share some tokens (so a token alone does not tell the topic) but not all.
  CHECK(overlapping_pairs > 0);
  CHECK(all_tokens.size() > 64);
}

TEST_CASE("each topic's stationary distribution sums to one and is stationary", "[data]") {
  const SyntheticSource source(DataConfig{}, 3, 64);
  for (const SyntheticTopic& topic : source.topics()) {
    const MarkovChain& chain = topic.chain;
    double total = 0.0;
    std::vector<double> moved(topic.stationary.size(), 0.0);
    for (int64_t s = 0; s < chain.states; ++s) {
      CHECK(topic.stationary[static_cast<size_t>(s)] > 0.0);
      total += topic.stationary[static_cast<size_t>(s)];
      for (int64_t slot = 0; slot < chain.branching; ++slot) {
        moved[static_cast<size_t>(chain.successor(s, slot))] +=
            topic.stationary[static_cast<size_t>(s)] * chain.probability(s, slot);
      }
    }
    CHECK(total == Approx(1.0).margin(1e-12));
    for (size_t s = 0; s < moved.size(); ++s) {
      CHECK(moved[s] == Approx(topic.stationary[s]).margin(1e-10));
    }
  }
}

TEST_CASE("entropy rates match closed forms", "[data]") {
  SECTION("uniform successors on a doubly stochastic chain: log(branching)") {
    MarkovChain chain;
    chain.states = 5;
    chain.branching = 2;
    for (int32_t s = 0; s < 5; ++s) {
      chain.successors.insert(chain.successors.end(), {(s + 1) % 5, (s + 2) % 5});
      chain.probabilities.insert(chain.probabilities.end(), {0.5, 0.5});
    }
    const std::vector<double> stationary = stationary_distribution(chain);
    for (double p : stationary) CHECK(p == Approx(0.2).margin(1e-12));
    CHECK(entropy_rate(chain, stationary) == Approx(std::log(2.0)).margin(1e-12));
  }
  SECTION("a pure cycle is periodic but still has a uniform stationary distribution") {
    MarkovChain chain;
    chain.states = 4;
    chain.branching = 1;
    chain.successors = {1, 2, 3, 0};
    chain.probabilities = {1.0, 1.0, 1.0, 1.0};
    const std::vector<double> stationary = stationary_distribution(chain);
    for (double p : stationary) CHECK(p == Approx(0.25).margin(1e-12));
    CHECK(entropy_rate(chain, stationary) == Approx(0.0).margin(1e-15));
  }
  SECTION("two states: pi = (b, a) / (a + b), rate = pi_0 H(a) + pi_1 H(b)") {
    const double a = 0.3;
    const double b = 0.1;
    MarkovChain chain;
    chain.states = 2;
    chain.branching = 2;
    chain.successors = {0, 1, 1, 0};
    chain.probabilities = {1 - a, a, 1 - b, b};
    const std::vector<double> stationary = stationary_distribution(chain);
    CHECK(stationary[0] == Approx(b / (a + b)).margin(1e-12));
    CHECK(stationary[1] == Approx(a / (a + b)).margin(1e-12));
    auto binary_entropy = [](double p) { return -p * std::log(p) - (1 - p) * std::log(1 - p); };
    const double expected = (b * binary_entropy(a) + a * binary_entropy(b)) / (a + b);
    CHECK(entropy_rate(chain, stationary) == Approx(expected).margin(1e-12));
  }
}

TEST_CASE("the entropy floor lies in (0, log branching) and matches sampled documents", "[data]") {
  const DataConfig config;
  const int64_t seq_len = 64;
  const SyntheticSource source(config, 11, seq_len);
  REQUIRE(source.entropy_floor().has_value());
  const double floor = *source.entropy_floor();
  CHECK(floor > 0.0);
  CHECK(floor < std::log(static_cast<double>(config.branching)));
  INFO(source.describe());
  CHECK_THAT(source.describe(), Catch::Contains("entropy floor") && Catch::Contains("log 512"));

  // The empirical conditional entropy of the next token given (topic, current token).
  const int64_t documents = 20000;
  const auto V = static_cast<uint64_t>(config.vocab_size);
  std::unordered_map<uint64_t, int64_t> transitions;
  std::unordered_map<uint64_t, int64_t> contexts;
  std::vector<int64_t> document(static_cast<size_t>(seq_len + 1));
  for (int64_t d = 0; d < documents; ++d) {
    const auto topic = static_cast<uint64_t>(source.write_document(
        stream_seed(11, SeedStream::Train, static_cast<uint64_t>(d), 0, 0), document.data()));
    for (int64_t t = 0; t < seq_len; ++t) {
      const uint64_t context = topic * V + static_cast<uint64_t>(document[static_cast<size_t>(t)]);
      ++contexts[context];
      ++transitions[context * V + static_cast<uint64_t>(document[static_cast<size_t>(t + 1)])];
    }
  }
  double surprise = 0.0;
  for (const auto& [key, count] : transitions) {
    const double conditional = static_cast<double>(count) / static_cast<double>(contexts[key / V]);
    surprise -= static_cast<double>(count) * std::log(conditional);
  }
  const double empirical = surprise / static_cast<double>(documents * seq_len);
  CHECK(empirical == Approx(floor).margin(0.01));
}

TEST_CASE("synthetic batches of [16, 65] take well under a millisecond", "[data]") {
  const auto source = make_token_source(DataConfig{}, 0, 64);
  const int repeats = 200;
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < repeats; ++step) source->train_batch(step, 0, 16);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("mean " << seconds / repeats * 1e6 << " us per batch");
  CHECK(seconds / repeats < 1e-3);
}

TEST_CASE("text from a file: training windows from the head, validation from the tail", "[data]") {
  TempFolder folder;
  const std::string text = random_letters(1000, 42);
  const fs::path file = folder.write("corpus.txt", text);
  const int64_t seq_len = 8;
  const auto source = make_token_source(file_config(DataKind::Text, file), 9, seq_len);
  CHECK(source->vocab_size() == 256);
  CHECK_THAT(source->describe(), Catch::Contains(file.string()));
  CHECK_FALSE(source->entropy_floor().has_value());

  const size_t train_size = 900;  // val_fraction 0.1 of 1000 bytes
  auto locate = [&](const Batch& batch, int64_t row) {
    const std::vector<int64_t> window = window_of(batch, row);
    return text.find(std::string(window.begin(), window.end()));
  };
  const Batch train = source->train_batch(5, 0, 32);
  check_batch_form(train, 32, seq_len, 256);
  for (int64_t row = 0; row < 32; ++row) {
    const size_t position = locate(train, row);
    REQUIRE(position != std::string::npos);
    CHECK(position + seq_len + 1 <= train_size);
  }
  const Batch val = source->val_batch(0, 32);
  check_batch_form(val, 32, seq_len, 256);
  for (int64_t row = 0; row < 32; ++row) {
    const size_t position = locate(val, row);
    REQUIRE(position != std::string::npos);
    CHECK(position >= train_size);
  }
  CHECK(same_batch(val, source->val_batch(0, 32)));
}

TEST_CASE("text from a folder: every file under it, recursively, in sorted path order", "[data]") {
  TempFolder folder;
  folder.write("b.txt", "BBB");
  folder.write(".git/objects/pack", "hidden folder");
  folder.write(".notes.swp", "hidden file");
  folder.write("a/sub/z.txt", "zz");
  folder.write("a/2.txt", "22");
  folder.write("a/1.txt", "11");
  folder.write("c/empty.txt", "");
  const std::vector<uint8_t> corpus = read_text_corpus(folder.path());
  CHECK(std::string(corpus.begin(), corpus.end()) == "1122zzBBB");

  // A folder trains like the concatenated file.
  TempFolder long_folder;
  const std::string first = random_letters(600, 1);
  const std::string second = random_letters(600, 2);
  long_folder.write("2-second.txt", second);
  long_folder.write("1-first.txt", first);
  const auto source = make_token_source(file_config(DataKind::Text, long_folder.path()), 0, 16);
  const Batch batch = source->train_batch(0, 0, 16);
  check_batch_form(batch, 16, 16, 256);
  for (int64_t row = 0; row < 16; ++row) {
    const std::vector<int64_t> window = window_of(batch, row);
    CHECK((first + second).find(std::string(window.begin(), window.end())) != std::string::npos);
  }
}

TEST_CASE("token files round trip as uint16 and uint32", "[data]") {
  struct Case {
    TokenDtype dtype;
    int width;
    int64_t vocab;
  };
  // The uint32 vocabulary exceeds 16 bits so that the upper bytes are exercised.
  for (const Case& c : {Case{TokenDtype::Uint16, 2, 60000}, Case{TokenDtype::Uint32, 4, 1 << 20}}) {
    INFO("element width " << c.width);
    TempFolder folder;
    // Distinct ids (7919 is prime to both vocabularies), so a window's first token locates it.
    std::vector<int64_t> tokens;
    std::unordered_map<int64_t, int64_t> position_of;
    for (int64_t i = 0; i < 2000; ++i) {
      tokens.push_back((i * 7919 + 50000) % c.vocab);
      position_of[tokens.back()] = i;
    }
    const fs::path file = folder.write("tokens.bin", little_endian(tokens, c.width));
    DataConfig config = file_config(DataKind::Tokens, file);
    config.token_dtype = c.dtype;
    config.vocab_size = c.vocab;
    const int64_t seq_len = 16;
    const auto source = make_token_source(config, 3, seq_len);
    CHECK(source->vocab_size() == c.vocab);

    const int64_t train_size = 1800;  // val_fraction 0.1 of 2000 tokens
    auto check_windows = [&](const Batch& batch, bool validation) {
      check_batch_form(batch, 32, seq_len, c.vocab);
      for (int64_t row = 0; row < 32; ++row) {
        const std::vector<int64_t> window = window_of(batch, row);
        const int64_t position = position_of.at(window.front());
        REQUIRE(position + seq_len + 1 <= 2000);
        CHECK(window == std::vector<int64_t>(tokens.begin() + position,
                                             tokens.begin() + position + seq_len + 1));
        if (validation) {
          CHECK(position >= train_size);
        } else {
          CHECK(position + seq_len + 1 <= train_size);
        }
      }
    };
    check_windows(source->train_batch(1, 2, 32), false);
    check_windows(source->val_batch(1, 32), true);
  }
}

TEST_CASE("a small array holds out its tail and a long one the tails of twenty equal parts",
          "[data]") {
  const HeldOutSplit small = held_out_split(1000, 0.1, 9);
  REQUIRE(small.validation.segments().size() == 1);
  CHECK(small.validation.segments()[0].begin == 900);
  CHECK(small.validation.segments()[0].end == 1000);
  CHECK(small.train.window_starts() == 900 - 9 + 1);

  const int64_t total = 1000003, window = 65;
  const HeldOutSplit split = held_out_split(total, 0.1, window);
  REQUIRE(split.validation.segments().size() == static_cast<std::size_t>(kMaxValidationSegments));
  CHECK(split.validation.tokens() == 100000);
  CHECK(split.train.tokens() + split.validation.tokens() == total);
  // Train and validation segments alternate and tile the array.
  int64_t next = 0;
  for (std::size_t p = 0; p < split.train.segments().size(); ++p) {
    CHECK(split.train.segments()[p].begin == next);
    CHECK(split.validation.segments()[p].begin == split.train.segments()[p].end);
    CHECK(split.validation.segments()[p].size() >= kMinPartWindows * window);
    next = split.validation.segments()[p].end;
  }
  CHECK(next == total);
  // Window starts are numbered across segments, and every one fits inside its segment.
  const SplitSegments& v = split.validation;
  for (int64_t index : {int64_t{0}, v.window_starts() / 3, v.window_starts() - 1}) {
    const int64_t start = v.start(index);
    const bool inside = std::any_of(
        v.segments().begin(), v.segments().end(),
        [&](const TokenSegment& s) { return start >= s.begin && start + window <= s.end; });
    CHECK(inside);
  }
  CHECK(v.start(v.window_starts() - 1) + window == total);
}

TEST_CASE("every seed is evaluated on the same held-out windows of a token file, from all parts",
          "[data]") {
  TempFolder folder;
  // Token i is i, so a window's first token is its position.
  const int64_t total = 200000, seq_len = 16;
  std::vector<int64_t> tokens(static_cast<std::size_t>(total));
  for (int64_t i = 0; i < total; ++i) tokens[static_cast<std::size_t>(i)] = i;
  const fs::path file = folder.write("tokens.bin", little_endian(tokens, 4));
  DataConfig config = file_config(DataKind::Tokens, file);
  config.token_dtype = TokenDtype::Uint32;
  config.vocab_size = 1 << 20;
  const auto first = make_token_source(config, 3, seq_len);
  const auto second = make_token_source(config, 4, seq_len);
  CHECK(same_batch(first->val_batch(2, 32), second->val_batch(2, 32)));
  CHECK_FALSE(same_batch(first->train_batch(2, 0, 32), second->train_batch(2, 0, 32)));

  const HeldOutSplit split = held_out_split(total, config.val_fraction, seq_len + 1);
  auto segment_of = [](const SplitSegments& segments, int64_t position) {
    const auto& all = segments.segments();
    for (std::size_t s = 0; s < all.size(); ++s)
      if (position >= all[s].begin && position + seq_len + 1 <= all[s].end)
        return static_cast<int64_t>(s);
    return int64_t{-1};
  };
  std::set<int64_t> validation_segments_seen;
  for (int64_t index = 0; index < 8; ++index) {
    const Batch val = first->val_batch(index, 32);
    const Batch train = first->train_batch(index, 0, 32);
    for (int64_t row = 0; row < 32; ++row) {
      const int64_t v = window_of(val, row).front(), t = window_of(train, row).front();
      REQUIRE(segment_of(split.validation, v) >= 0);
      CHECK(segment_of(split.train, t) >= 0);
      validation_segments_seen.insert(segment_of(split.validation, v));
    }
  }
  // 256 windows over 20 equal segments: all but a few are drawn from.
  CHECK(validation_segments_seen.size() >= 15);
}

TEST_CASE("data errors name the file and say what to do", "[data]") {
  TempFolder folder;
  auto check_message = [](const std::string& message, const fs::path& path,
                          const std::string& what) {
    INFO(message);
    CHECK_THAT(message, Catch::Contains(path.string()) && Catch::Contains(what));
    CHECK(message.find('\n') == std::string::npos);
  };

  SECTION("missing path") {
    const fs::path missing = folder.path() / "missing.txt";
    check_message(data_error(file_config(DataKind::Text, missing)), missing, "does not exist");
    check_message(data_error(file_config(DataKind::Tokens, missing)), missing, "does not exist");
  }
  SECTION("empty file") {
    const fs::path empty = folder.write("empty.bin", "");
    check_message(data_error(file_config(DataKind::Text, empty)), empty, "empty");
    check_message(data_error(file_config(DataKind::Tokens, empty)), empty, "empty");
  }
  SECTION("empty folder, and a folder of empty files") {
    const fs::path empty_folder = folder.path() / "nothing";
    fs::create_directories(empty_folder);
    check_message(data_error(file_config(DataKind::Text, empty_folder)), empty_folder, "no files");
    const fs::path hollow = folder.write("hollow/a.txt", "").parent_path();
    check_message(data_error(file_config(DataKind::Text, hollow)), hollow, "empty");
  }
  SECTION("a token path that is a folder") {
    check_message(data_error(file_config(DataKind::Tokens, folder.path())), folder.path(),
                  "is a folder");
  }
  SECTION("a validation split shorter than one window") {
    const fs::path short_file = folder.write("short.txt", random_letters(100, 0));
    check_message(data_error(file_config(DataKind::Text, short_file), 64), short_file,
                  "has 100 tokens; the validation split (val_fraction 0.1) has 10, fewer than "
                  "seq_len+1 = 65: use a longer file, a larger data.val_fraction or a shorter "
                  "train.seq_len");
  }
  SECTION("a training split shorter than one window") {
    const fs::path file = folder.write("short.txt", random_letters(200, 0));
    DataConfig config = file_config(DataKind::Text, file);
    config.val_fraction = 0.9;
    check_message(data_error(config, 64), file, "the training split");
  }
  SECTION("a token id outside the declared vocabulary") {
    std::vector<int64_t> tokens(300, 5);
    tokens[137] = 70;
    const fs::path file = folder.write("tokens.bin", little_endian(tokens, 2));
    DataConfig config = file_config(DataKind::Tokens, file);
    config.vocab_size = 64;
    check_message(data_error(config, 8), file,
                  "token id 70 at index 137, outside the declared vocabulary "
                  "data.vocab_size = 64");
  }
  SECTION("a file size that is not a whole number of tokens") {
    const fs::path odd = folder.write("odd.bin", std::string(5, '\0'));
    check_message(data_error(file_config(DataKind::Tokens, odd)), odd, "5 bytes");
    const fs::path six = folder.write("six.bin", std::string(6, '\0'));
    DataConfig config = file_config(DataKind::Tokens, six);
    config.token_dtype = TokenDtype::Uint32;
    check_message(data_error(config), six, "4-byte uint32");
  }
  SECTION("an unreadable file") {
    const fs::path locked = folder.write("locked.txt", random_letters(1000, 0));
    fs::permissions(locked, fs::perms::none);
    if (std::ifstream(locked).is_open()) {
      WARN("running with permission to read any file (root?): unreadable-file check skipped");
    } else {
      check_message(data_error(file_config(DataKind::Text, locked), 8), locked, "cannot read");
      check_message(data_error(file_config(DataKind::Tokens, locked), 8), locked, "cannot open");
    }
  }
  SECTION("no path at all, and impossible synthetic sizes") {
    CHECK_THAT(data_error(file_config(DataKind::Tokens, "")), Catch::Contains("set data.path"));
    DataConfig synthetic;
    synthetic.branching = synthetic.topic_vocab;
    CHECK_THAT(data_error(synthetic), Catch::Contains("data.branching"));
    CHECK_THAT(data_error(DataConfig{}, 0), Catch::Contains("train.seq_len"));
  }
}
