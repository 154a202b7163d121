#pragma once
// What one MoE layer did in one optimizer step, per logical rank: the figures the paper compares
// (loads, all-to-all bytes, memory by category) and the modeled cluster time of that work.

#include <cstdint>
#include <vector>

#include "core/pipeline/pair_exchange.hpp"

namespace lrmoe {

// Memory of one rank by the categories of the design (bytes). The paper's subtotal is
// owned + replicas + forward_tokens + backward_tokens.
struct RankMemory {
  int64_t owned = 0;            // parameters of the experts the rank owns
  int64_t replicas = 0;         // parameters of the replicas it hosts
  int64_t gradients = 0;        // expert gradient buffers (owned and replicas)
  int64_t optimizer = 0;        // Adam state of the experts it owns
  int64_t forward_tokens = 0;   // token buffers of the pairs it computes in forward
  int64_t backward_tokens = 0;  // token buffers of the kept pairs it runs backward for
  int64_t dense = 0;            // dense parameters, gradients, optimizer state, activations (estimated)

  int64_t subtotal() const { return owned + replicas + forward_tokens + backward_tokens; }
  int64_t total() const { return subtotal() + gradients + optimizer + dense; }
  RankMemory& operator+=(const RankMemory& other);
  // Category-wise maximum: the peak over the micro-batches of a step.
  static RankMemory max(const RankMemory& a, const RankMemory& b);
};

// The four all-to-alls of a layer and the replica traffic, in bytes over all ranks.
struct LayerTraffic {
  int64_t forward_dispatch = 0;
  int64_t forward_combine = 0;
  int64_t backward_dispatch = 0;
  int64_t backward_return = 0;
  int64_t replica_sync = 0;  // replica parameters out and replica gradients back to owners

  LayerTraffic& operator+=(const LayerTraffic& other);
};

// Seconds spent deciding and rearranging rather than computing; part of the layer's time.
struct PipelineOverhead {
  double placement = 0;
  double metric = 0;
  double selection = 0;
  double routing = 0;     // forward and backward
  double compaction = 0;  // sorting pairs by destination and instance, building offsets

  double total() const { return placement + metric + selection + routing + compaction; }
  PipelineOverhead& operator+=(const PipelineOverhead& other);
};

// What one process measured of a layer in one step.
struct ProcessStepMeasurement {
  int64_t process = 0;
  double forward_seconds = 0;
  double backward_seconds = 0;
  ExchangeMeasurement exchange;  // its all-to-all-v calls: bytes to and from other processes, wall time
};

struct LayerStepStatistics {
  int64_t layer = 0;  // index among the MoE layers
  int64_t pairs_routed = 0;
  int64_t pairs_dropped = 0;  // dropped in forward by a placement's forward capacity
  int64_t pairs_kept = 0;     // with backward work
  int64_t replicas = 0;       // expert instances beyond one per expert (last micro-batch)
  std::vector<int64_t> forward_load;   // per rank: pairs computed
  std::vector<int64_t> backward_load;  // per rank: kept pairs
  std::vector<int64_t> bytes_sent;     // per rank: pair-row bytes to other ranks, all four all-to-alls
  std::vector<int64_t> bytes_received; // per rank: from other ranks
  LayerTraffic traffic;
  std::vector<RankMemory> memory;  // per rank, peak over the step's micro-batches
  double forward_seconds = 0;      // measured wall time of the layer (the slowest process's)
  double backward_seconds = 0;
  ExchangeMeasurement exchange;    // this process's all-to-all-v calls
  std::vector<ProcessStepMeasurement> processes;  // every process's measurements (multi-process runs)
  PipelineOverhead overhead;       // part of the two above
  double modeled_seconds = 0;      // cost model: slowest rank's compute plus its communication
};

}  // namespace lrmoe
