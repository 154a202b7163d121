#pragma once
// A rank_memory row from its seven byte categories alone (owned, replicas, gradients, optimizer,
// forward tokens, backward tokens, dense), with no timeline moment: the plain numbers a store test
// writes.

#include <array>
#include <cstdint>

#include "store/results_store.hpp"

namespace lrmoe_test {

inline lrmoe::RankMemoryRecord rank_memory_row(int64_t step, int64_t rank,
                                               const std::array<int64_t, 7>& bytes) {
  lrmoe::RankMemoryRecord row;
  row.step = step;
  row.rank = rank;
  row.owned = bytes[0];
  row.replicas = bytes[1];
  row.gradients = bytes[2];
  row.optimizer = bytes[3];
  row.forward_tokens = bytes[4];
  row.backward_tokens = bytes[5];
  row.dense = bytes[6];
  return row;
}

}  // namespace lrmoe_test
