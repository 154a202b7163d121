#pragma once
// The [data] section of an experiment: where the tokens come from. Field meanings, defaults and
// ranges are documented once, in the schema table (core/config/experiment_schema.cpp; `lrmoe
// schema` prints it).

#include <cstdint>
#include <string>

namespace lrmoe {

enum class DataKind { Synthetic, Text, Tokens };
enum class TokenDtype { Uint16, Uint32 };

struct DataConfig {
  DataKind kind = DataKind::Synthetic;
  std::string path;  // text: file or folder; tokens: flat binary file
  TokenDtype token_dtype = TokenDtype::Uint16;
  int64_t vocab_size = 512;   // tokens: declared vocabulary; synthetic: generated vocabulary
  double val_fraction = 0.1;  // text/tokens: held out for evaluation (Note [Held-out split])
  int64_t topics = 8;         // synthetic: number of topic-specific Markov sources
  int64_t topic_vocab = 64;   // synthetic: tokens each topic uses
  int64_t branching = 4;      // synthetic: successors of each token within a topic
  std::string tokenizer;      // a Hugging Face tokenizer.json the tokens were made with
};

}  // namespace lrmoe
