#pragma once
// The hardware profile "this-machine" (kThisMachineProfile): measured, not read from a file.

#include <cstdint>

#include "core/cost/hardware_profile.hpp"

namespace lrmoe {

// The profile "this-machine", measured on this host at each call (about half a second):
// peak_flops from the BLAS matmul probe, memory_bandwidth from a large tensor copy (bytes read
// plus bytes written per second), element_bytes 4 (CPU runs train in float32), ranks_per_node =
// `ranks` (all logical ranks share this host), intra-node bandwidth = the copy's payload bytes
// per second, intra-node latency = the time of a small index_select + copy (what moving a few
// rows between logical ranks of one process costs), inter-node = intra-node, and a single-point
// efficiency curve {1, 1.0} (the probe measured a real GEMM). Throws std::invalid_argument when
// `ranks` < 1.
HardwareProfile probe_this_machine(int64_t ranks);

}  // namespace lrmoe
