// data.tokenizer (Note [Data provenance]): a Hugging Face tokenizer.json's vocabulary and
// SHA-256, checked against the corpus manifest's tokenizer and the model's vocabulary.
#include <catch2/catch.hpp>

#include <string>

#include "core/data/token_source.hpp"
#include "core/data/tokenizer_file.hpp"
#include "core/system/sha256.hpp"
#include "support/temp_folder.hpp"

using Catch::Matchers::Contains;
using lrmoe::DataError;
using lrmoe_test::TempFolder;

namespace {

// A byte-level BPE's shape: a vocabulary object and added special tokens past it.
const std::string kTokenizer = R"({
  "version": "1.0",
  "added_tokens": [{"id": 5, "content": "<|endoftext|>", "special": true},
                   {"id": 6, "content": "<|im_start|>", "special": true}],
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4}, "merges": []}
})";

std::string data_error(const std::function<void()>& body) {
  try {
    body();
  } catch (const DataError& e) {
    return e.what();
  }
  return "<no DataError>";
}

}  // namespace

TEST_CASE("a tokenizer.json's vocabulary counts its added tokens and its digest is its bytes'",
          "[data]") {
  TempFolder folder;
  const auto file = folder.write("tok/tokenizer.json", kTokenizer);
  const lrmoe::TokenizerFile read = lrmoe::read_tokenizer_file(folder.path() / "tok");
  CHECK(read.vocab_size == 7);
  CHECK(read.model == "BPE");
  CHECK(read.path == file.string());
  CHECK(read.sha256 == lrmoe::sha256_hex(kTokenizer));
  // A Unigram model lists [piece, score] pairs: the ids are their places.
  folder.write("u.json", R"({"model": {"type": "Unigram", "vocab": [["a", -1.0], ["b", -2.0]]}})");
  CHECK(lrmoe::read_tokenizer_file(folder.path() / "u.json").vocab_size == 2);
}

TEST_CASE("a tokenizer that is not the corpus's, or larger than the model, is refused", "[data]") {
  TempFolder folder;
  lrmoe::DataConfig data;
  data.tokenizer = folder.write("tokenizer.json", kTokenizer).string();
  lrmoe::DataProvenance provenance;
  CHECK(lrmoe::check_tokenizer(data, provenance, 7).vocab_size == 7);
  CHECK_THAT(data_error([&] { lrmoe::check_tokenizer(data, provenance, 6); }),
             Contains("has 7 tokens, more than the model's 6; raise model.vocab_size to at least "
                      "7"));
  provenance.corpus = lrmoe::CorpusManifest{};
  provenance.corpus->tokenizer = "sentencepiece 0.1.97 bpe";
  provenance.corpus->tokenizer_sha256 = std::string(64, '0');
  CHECK_THAT(data_error([&] { lrmoe::check_tokenizer(data, provenance, 7); }),
             Contains("is not the tokenizer the tokens were made with: their manifest names "
                      "sentencepiece 0.1.97 bpe"));
  provenance.corpus->tokenizer_sha256 = lrmoe::sha256_hex(kTokenizer);
  CHECK(lrmoe::check_tokenizer(data, provenance, 7).sha256 == provenance.corpus->tokenizer_sha256);
}

TEST_CASE("a file that is not a tokenizer.json is refused naming it", "[data]") {
  TempFolder folder;
  for (const auto& [text, says] :
       {std::pair{"[1, 2]", "has no \"model\" object"},
        std::pair{"{\"model\": {\"vocab\": {}}}", "its vocabulary is empty"},
        std::pair{"{\"model\": {\"vocab\": {\"a\": -3}}}", "a token id is not one"},
        std::pair{"{", "not valid JSON"},
        std::pair{"{\"model\": {\"vocab\": {\"a\": 1e999}}}", "not valid JSON"}}) {
    const auto file = folder.write("bad.json", text);
    CHECK_THAT(data_error([&] { lrmoe::read_tokenizer_file(file); }),
               Contains("data.tokenizer " + file.string() + ": ") && Contains(says));
  }
  CHECK_THAT(data_error([&] { lrmoe::read_tokenizer_file(folder.path() / "none.json"); }),
             Contains("cannot read it"));
}
