#pragma once
// Forward capacity drops, for placements that set a capacity per expert (the baselines that drop
// tokens, as Megatron does): an expert computes at most its capacity of its routed pairs, the
// ones with the highest gates.

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace lrmoe {

// The routed pairs each expert computes, as indices into the routed pairs, increasing ([n] int64
// CPU). `experts` ([pairs] int64 CPU) is sorted (Note [Pair order] in docs/notes.md), `gates`
// ([pairs] float) goes with it, `counts` and `capacity` are [experts]. Ties in gate keep the
// earlier pair.
torch::Tensor within_forward_capacity(const torch::Tensor& experts, const torch::Tensor& gates,
                                      const std::vector<int64_t>& counts,
                                      const std::vector<int64_t>& capacity);

}  // namespace lrmoe
