#pragma once
// Every process plans every pass over the routed pairs of the whole run, so that the placement,
// the selection and the routing see exactly what one process holding all tokens would see, and
// all processes reach the same plan without another round of messages (Note [Exact multi-process
// plan] in docs/notes.md). These gather the pairs and their per-pair signals from all processes
// in that order.

#include <torch/torch.h>

#include "core/distributed/collectives.hpp"

namespace lrmoe {

// The pairs of all processes by expert, then token: process p's tokens come before process
// p+1's, so the order is the one a single process would have (Note [Pair order]).
struct GlobalPairs {
  torch::Tensor experts;     // [n] int64, on the device of the local pairs
  torch::Tensor gates;       // [n] float32, detached, on that device
  torch::Tensor home;        // [n] int64 home rank, on that device
  torch::Tensor source_row;  // [n] int64 on that device: the pair's index in its process's list
  // [n] int64 on that device: process * pairs per process + source_row, the pair's place in the
  // process-ordered lists (PairBatch::pair_ids)
  torch::Tensor pair_ids;
};

// `experts`, `gates`: this process's pairs sorted by expert; `home`: their home ranks; all on
// the training device, where the gathered pairs stay. Every process has as many pairs (as many
// tokens, top-k each), so the gather needs no counts from the device.
GlobalPairs gather_pairs(Collectives& collectives, const torch::Tensor& experts,
                         const torch::Tensor& gates, const torch::Tensor& home);

// `local`: [m, ...] rows of the pairs homed here, in pair order; `home_process`: [n] int64
// process of every pair, on the device of `local`; `rows_per_process`: how many pairs each
// process homes (known on the host from the plan's layout). Returns the [n, ...] rows of all
// pairs in pair order, on the device of `local`.
torch::Tensor gather_in_pair_order(Collectives& collectives, const torch::Tensor& local,
                                   const torch::Tensor& home_process,
                                   const std::vector<int64_t>& rows_per_process);

}  // namespace lrmoe
