// What a run trains on is recorded with it: the data's bytes and SHA-256, and for a tokens file
// prepared by scripts/prepare-corpus.sh the corpus and tokenizer its manifest names, checked
// against the tokens (Note [Data provenance]).
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/data/token_source.hpp"
#include "core/system/sha256.hpp"
#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/temp_folder.hpp"

using Catch::Contains;
using Catch::StartsWith;
using lrmoe::DataConfig;
using lrmoe::DataError;
using lrmoe_test::TempFolder;

namespace {

// 3000 uint16 tokens below 300, little-endian.
std::string corpus_token_bytes() {
  std::string bytes;
  for (int i = 0; i < 3000; ++i) {
    const int id = (i * 37) % 300;
    bytes.push_back(static_cast<char>(id & 0xff));
    bytes.push_back(static_cast<char>(id >> 8));
  }
  return bytes;
}

// A manifest as scripts/corpus/tokenize_corpus.py writes it, for `bytes`.
std::string manifest_for(const std::string& bytes, int64_t vocab = 300) {
  return fmt::format(R"([corpus]
name = "test-corpus"
bytes = 123
sha256 = "{}"
sources = ["pkg-a=1.0", "pkg-b=2.0"]

[tokenizer]
library = "sentencepiece 0.1.97"
model = "bpe"
vocab_size = {}
sha256 = "abc"

[tokens]
dtype = "uint16"
count = {}
sha256 = "{}"
)",
                     std::string(64, 'c'), vocab, bytes.size() / 2, lrmoe::sha256_hex(bytes));
}

DataConfig corpus_config(const std::string& path) {
  DataConfig config;
  config.kind = lrmoe::DataKind::Tokens;
  config.path = path;
  config.vocab_size = 300;
  return config;
}

std::string manifest_error(const DataConfig& config) {
  try {
    lrmoe::make_token_source(config, 0, 16);
  } catch (const DataError& error) {
    return error.what();
  }
  FAIL("no DataError");
  return "";
}

}  // namespace

TEST_CASE(
    "a tokens file's provenance is its bytes' digest, and its manifest's corpus and tokenizer",
    "[data]") {
  TempFolder folder;
  const std::string bytes = corpus_token_bytes();
  const std::string file = folder.write("tokens.bin", bytes).string();

  const lrmoe::DataProvenance bare =
      lrmoe::make_token_source(corpus_config(file), 0, 16)->provenance();
  CHECK(bare.kind == "tokens");
  CHECK(bare.bytes == 6000);
  CHECK(bare.tokens == 3000);
  CHECK(bare.sha256 == lrmoe::sha256_hex(bytes));
  CHECK_FALSE(bare.corpus.has_value());

  folder.write("tokens.bin.toml", manifest_for(bytes));
  const auto source = lrmoe::make_token_source(corpus_config(file), 0, 16);
  const lrmoe::DataProvenance with = source->provenance();
  REQUIRE(with.corpus.has_value());
  CHECK(with.corpus->name == "test-corpus");
  CHECK(with.corpus->sources == "pkg-a=1.0, pkg-b=2.0");
  CHECK(with.corpus->tokenizer == "sentencepiece 0.1.97 bpe");
  CHECK(with.corpus->tokenizer_vocab == 300);
  CHECK_THAT(source->describe(), Contains("of the corpus 'test-corpus' (123 bytes"));

  CHECK(lrmoe::make_token_source({}, 1, 16)->provenance().kind == "synthetic");
}

TEST_CASE("tokens that are not the ones their manifest describes are refused at the manifest",
          "[data]") {
  TempFolder folder;
  const std::string bytes = corpus_token_bytes();
  const std::string file = folder.write("tokens.bin", bytes).string();
  const std::string manifest = file + ".toml";

  SECTION("other bytes") {
    std::string changed = bytes;
    changed[10] = 7;
    folder.write("tokens.bin.toml", manifest_for(changed));
    CHECK_THAT(manifest_error(corpus_config(file)),
               StartsWith(manifest + ":16:10: tokens.sha256: '" + file + "' (3000 tokens") &&
                   Contains("prepare it again (scripts/prepare-corpus.sh)"));
  }
  SECTION("another vocabulary than the experiment declares") {
    folder.write("tokens.bin.toml", manifest_for(bytes, 512));
    CHECK(manifest_error(corpus_config(file)) ==
          manifest +
              ":10:14: tokenizer.vocab_size: the tokenizer has 512 tokens, but "
              "data.vocab_size = 300; set data.vocab_size = 512");
  }
  SECTION("another dtype") {
    DataConfig config = corpus_config(file);
    config.token_dtype = lrmoe::TokenDtype::Uint32;
    folder.write("tokens.bin.toml", manifest_for(bytes));
    CHECK_THAT(manifest_error(config),
               StartsWith(manifest + ":14:9: tokens.dtype: the tokens are "
                                     "uint16, but data.token_dtype = \"uint32\""));
  }
  SECTION("a manifest that is not one") {
    folder.write("tokens.bin.toml", "[corpus\nname = 1\n");
    CHECK_THAT(manifest_error(corpus_config(file)), StartsWith(manifest + ":1:"));
    folder.write("tokens.bin.toml", "[corpus]\nname = 1\n");
    CHECK_THAT(manifest_error(corpus_config(file)),
               Contains(manifest + ": no tokens.dtype") && Contains("scripts/prepare-corpus.sh"));
    std::string wrong_type = manifest_for(bytes);
    wrong_type.replace(wrong_type.find("name = \"test-corpus\""), 20, "name = 5");
    folder.write("tokens.bin.toml", wrong_type);
    CHECK(manifest_error(corpus_config(file)) == manifest + ":2:8: corpus.name must be a string");
  }
}

TEST_CASE("a run records what it trained on in run_data", "[data][store][e2e]") {
  TempFolder folder;
  const std::string bytes = corpus_token_bytes();
  const std::string file = folder.write("tokens.bin", bytes).string();
  folder.write("tokens.bin.toml", manifest_for(bytes));
  const std::string db = folder.file("results.db");
  const std::string tiny = std::string(LRMOE_SOURCE_DIR) + "/experiments/tiny-moe.toml";
  for (const std::vector<std::string>& data :
       {std::vector<std::string>{},
        std::vector<std::string>{"--set", "data.kind=tokens", "--set", "data.path=" + file, "--set",
                                 "data.vocab_size=300"}}) {
    std::vector<std::string> args{
        "run", tiny, "--db", db, "--set", "train.max_steps=2", "--set", "train.warmup_steps=0"};
    args.insert(args.end(), data.begin(), data.end());
    const auto [code, output] = lrmoe_test::run_lrmoe(args, folder.file("run.log"));
    INFO(output);
    REQUIRE(code == 0);
  }
  const auto store = lrmoe::ResultsStore::open_read_only(db);
  const auto rows = store->query(
      "SELECT run, kind, path IS NULL, sha256, tokens, corpus, corpus_sources, tokenizer_vocab "
      "FROM run_data ORDER BY run");
  REQUIRE(rows.rows.size() == 2);
  CHECK(rows.rows[0][1].value() == "synthetic");
  CHECK(rows.rows[0][2].value() == "1");
  CHECK_FALSE(rows.rows[0][5].has_value());
  CHECK(rows.rows[1][1].value() == "tokens");
  CHECK(rows.rows[1][3].value() == lrmoe::sha256_hex(bytes));
  CHECK(rows.rows[1][4].value() == "3000");
  CHECK(rows.rows[1][5].value() == "test-corpus");
  CHECK(rows.rows[1][6].value() == "pkg-a=1.0, pkg-b=2.0");
  CHECK(rows.rows[1][7].value() == "300");
}
