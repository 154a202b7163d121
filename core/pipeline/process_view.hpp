#pragma once
// How the R logical expert-parallel ranks map onto the P processes of a run: process p hosts
// the consecutive ranks [p * R/P, (p + 1) * R/P). With P = 1 every rank lives in this process.
// Consecutive, so that a process's destination rows are one run of a layout (Note [Pair order]
// in docs/notes.md).

#include <torch/torch.h>

#include <cstdint>

namespace lrmoe {

struct ProcessView {
  int64_t index = 0;              // this process
  int64_t processes = 1;          // P
  int64_t ranks_per_process = 1;  // R / P

  int64_t process_of(int64_t rank) const { return rank / ranks_per_process; }
  // [n] int64 processes of [n] int64 ranks; with a rank per process the ranks tensor itself
  // (not a copy: do not write into it).
  torch::Tensor process_of(const torch::Tensor& ranks) const {
    return ranks_per_process == 1 ? ranks : ranks.div(ranks_per_process, "floor");
  }
  int64_t first_rank() const { return index * ranks_per_process; }
};

}  // namespace lrmoe
