#pragma once
// The full-size configuration whose projection (lrmoe project) `lrmoe compare` shows in its main
// table's "projected s" column and `lrmoe compare --plot --x projected` draws: one place, so that
// the figure and the table always mean the same projection.

#include <cstdint>
#include <string>

#include "store/results_store.hpp"

namespace lrmoe {

constexpr int64_t kHeadlineRanks = 16, kHeadlineTokens = 4096;
constexpr const char* kHeadlineProfile = "h100-sxm-8gpu-ib400";

inline bool is_headline_projection(const ProjectionRecord& p) {
  return p.ranks == kHeadlineRanks && p.tokens_per_rank == kHeadlineTokens &&
         p.profile == kHeadlineProfile;
}

}  // namespace lrmoe
