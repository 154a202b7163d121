#pragma once
// Compaction: the pairs of one pass (forward: computed pairs, backward: kept pairs) sorted by
// destination instance, so that each destination rank receives one contiguous payload and each
// instance one contiguous slice for the grouped GEMM; and who sends how many pairs to whom.

#include <torch/torch.h>

#include <vector>

#include "core/pipeline/instance_table.hpp"

namespace lrmoe {

struct PairLayout {
  int64_t ranks = 0;
  torch::Tensor order;                    // [pairs] int64: pair index of each destination row
  torch::Tensor instance;                 // [pairs] int64 CPU: instance of each pair (pair order)
  std::vector<int64_t> instance_offsets;  // [instances + 1]: rows of instance i
  std::vector<int64_t> load;              // [ranks]: pairs each rank receives (its own included)
  std::vector<int64_t> sent;              // [ranks]: pairs each rank sends to another rank
  std::vector<int64_t> received;          // [ranks]: pairs each rank receives from another rank
  std::vector<int64_t> peers_sent;        // [ranks]: ranks each rank sends at least one pair to
  std::vector<int64_t> peers_received;    // [ranks]: ranks each rank receives from

  int64_t pairs() const { return instance.numel(); }
  int64_t crossing() const;  // pairs whose destination is not their home rank
};

// `instance`: [pairs] int64 CPU index into table.instances; `home`: [pairs] int64 CPU home ranks.
PairLayout build_pair_layout(const torch::Tensor& instance, const torch::Tensor& home, const InstanceTable& table,
                             int64_t ranks, const torch::Device& device);

}  // namespace lrmoe
