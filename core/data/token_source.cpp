#include "core/data/token_source.hpp"

#include <fmt/format.h>

#include "core/data/synthetic_source.hpp"
#include "core/data/text_source.hpp"
#include "core/data/token_file_source.hpp"

namespace lrmoe {

std::unique_ptr<TokenSource> make_token_source(const DataConfig& config, uint64_t seed,
                                               int64_t seq_len) {
  // Every source cuts windows of seq_len + 1 tokens.
  if (seq_len < 1) {
    throw DataError(fmt::format("train.seq_len = {} must be at least 1", seq_len));
  }
  if (config.kind == DataKind::Synthetic) {
    return std::make_unique<SyntheticSource>(config, seed, seq_len);
  }
  if (config.path.empty()) {
    const char* kind = config.kind == DataKind::Text ? "text" : "tokens";
    throw DataError(fmt::format("data.kind = \"{}\" needs a file: set data.path", kind));
  }
  if (config.kind == DataKind::Text) return open_text_source(config, seed, seq_len);
  return open_token_file_source(config, seed, seq_len);
}

}  // namespace lrmoe
