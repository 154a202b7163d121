#pragma once
// Parameter counts from the configuration alone, so that full-size presets (tens of billions of
// parameters) can be sized without allocating them.

#include <cstdint>

#include "core/config/model_config.hpp"

namespace lrmoe {

struct ParameterCount {
  int64_t total = 0;
  // Parameters a token's computation multiplies with: attention, dense FFNs, shared experts,
  // top_k routed experts, routers, norms and the LM head. The input embedding is a table lookup,
  // not a matmul, so it is not counted as active.
  int64_t active = 0;
};

ParameterCount count_parameters(const ModelConfig& config);

// The parameters of one routed expert over every MoE layer (what a process that does not hold
// the expert saves with sharded expert state).
int64_t routed_expert_parameters(const ModelConfig& config);

}  // namespace lrmoe
