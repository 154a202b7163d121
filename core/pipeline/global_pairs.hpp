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
  torch::Tensor home;        // [n] int64 CPU home rank
  torch::Tensor source_row;  // [n] int64 CPU: index of the pair in its own process's list
};

// `experts`, `gates`: this process's pairs sorted by expert; `home`: their CPU home ranks.
// Every process has as many pairs (as many tokens, top-k each).
GlobalPairs gather_pairs(Collectives& collectives, const torch::Tensor& experts,
                         const torch::Tensor& gates, const torch::Tensor& home);

// `local`: [m, ...] rows of the pairs homed here, in pair order; `home_process`: [n] int64 CPU
// process of every pair. Returns the [n, ...] rows of all pairs in pair order.
torch::Tensor gather_in_pair_order(Collectives& collectives, const torch::Tensor& local,
                                   const torch::Tensor& home_process);

}  // namespace lrmoe
