#pragma once
// One rank's memory timeline allocated for real (`lrmoe replay --allocate`, Note [Replay]): the
// buffers the memory model says a rank holds over one pass of the MoE layers (Note [Memory
// model]), allocated on a device in the order the timeline makes them live and freed when it
// ends them. Nothing is computed; the buffers are uninitialised bytes. On a GPU the caching
// allocator's peak then says what the modeled peak costs the allocator (its rounding, its
// granularity), beside the model's figure.

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "core/pipeline/memory_timeline.hpp"

namespace lrmoe {

struct AllocatedPeak {
  int64_t modeled = 0;    // the timeline's peak total (pass_peak), bytes
  int64_t allocated = 0;  // the allocator's peak of allocated bytes over the walk, above what
                          // was allocated before it
  int64_t buffers = 0;    // allocations made
};

// `layers[l]`: what the rank holds for MoE layer l in the pass (whole pairs). None where
// `device` has no caching allocator to ask (the CPU); the walk itself runs on any device. Throws
// c10::Error (out of memory among others) from the allocator.
std::optional<AllocatedPeak> allocate_timeline(const MemoryCosts& costs,
                                               const std::vector<LayerHolding>& layers,
                                               const StaticMemory& fixed,
                                               const torch::Device& device);

}  // namespace lrmoe
