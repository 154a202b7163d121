#pragma once
// What one MoE layer did in one optimizer step, per logical rank: the figures the paper compares
// (loads, all-to-all bytes, what each rank held) and the modeled cluster time of that work.

#include <cstdint>
#include <vector>

#include "core/cost/cost_model.hpp"
#include "core/device/span_timer.hpp"
#include "core/pipeline/critical_path.hpp"
#include "core/pipeline/pair_exchange.hpp"
#include "lrmoe/memory_model.hpp"
#include "lrmoe/placement.hpp"

namespace lrmoe {

// The four all-to-alls of a layer and the replica traffic, in bytes over all ranks.
struct LayerTraffic {
  int64_t forward_dispatch = 0;
  int64_t forward_combine = 0;
  int64_t backward_dispatch = 0;
  int64_t backward_return = 0;
  // Parameter transfers: replica parameters out and their gradients back, once per rank that
  // hosts an expert it does not own, and owners that moved since the previous pass
  int64_t replica_sync = 0;
  // Of all of the above, the bytes between ranks on different nodes of the hardware profile
  // (ranks_per_node): what a placement that keeps traffic within a node saves
  int64_t cross_node = 0;

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

// What agreeing on the plans cost each rank (core/pipeline/plan_collectives.hpp), from the plans'
// sizes: one rank per process, as the cost model assumes.
struct PlanCollectives {
  double seconds = 0;         // modeled: ModeledTime::gathers
  double bytes_received = 0;  // by the rank that receives most
  double bytes_held = 0;      // per rank: the plan's gathered arrays or count matrices

  // Passes one after another: times and bytes add, what is held is the largest.
  PlanCollectives& operator+=(const PlanCollectives& other);
};

// What one process measured of a layer in one step.
struct ProcessStepMeasurement {
  int64_t process = 0;
  ProcessPhaseTimes times;  // its wall and planning seconds of the layer, per phase
  // its all-to-all-v calls: bytes to and from other processes, wall time
  ExchangeMeasurement exchange;
  // its expert fetches and gradient returns (sharded expert state), the same figures
  ExchangeMeasurement parameters;
};

// The layer's timed spans of one step, unread (Note [Device timing]): on CUDA, events the
// trainer reads one step later.
struct LayerSpans {
  TimedSpans forward;                            // the layer's forward
  TimedSpans backward;                           // and its backward
  TimedSpans exchange;                           // this process's all-to-all-v calls
  std::vector<TimedSpans> rank_expert[kPhases];  // [phase][rank]: each rank's timed expert work
};

// The name a PlanInformation is recorded by: "this pass", "earlier passes", "warm-up",
// "no counts".
const char* plan_information_name(PlanInformation information);

struct LayerStepStatistics {
  int64_t layer = 0;  // index among the MoE layers
  int64_t pairs_routed = 0;
  int64_t pairs_dropped = 0;      // dropped in forward by a placement's forward capacity
  int64_t pairs_kept = 0;         // with backward work
  bool forward_capacity = false;  // a pass's placement set a forward capacity
  int64_t replicas = 0;           // expert instances beyond one per expert (last micro-batch)
  // The placement of the last micro-batch: every expert instance, sorted by (rank, slot).
  std::vector<ExpertInstance> placement;
  // What the placement planned from (PlanInformation): the last pass's, or WarmUp when any pass
  // of the step was a warm-up pass.
  PlanInformation information = PlanInformation::ThisPass;
  // The passes' placements were planned before the router (ExpertPipeline::place_ahead): their
  // replicas are held from the previous MoE layer's forward (Note [Overlapped expert fetch]).
  bool placed_ahead = false;
  std::vector<int64_t> forward_load;   // per rank: pairs computed
  std::vector<int64_t> backward_load;  // per rank: kept pairs
  // per rank: pair-row bytes to other ranks, all four all-to-alls
  std::vector<int64_t> bytes_sent;
  std::vector<int64_t> bytes_received;  // per rank: from other ranks
  LayerTraffic traffic;
  // Per pass (micro-batch), per rank: what the rank held for this layer (its memory timeline's
  // input, core/pipeline/memory_timeline.hpp).
  std::vector<std::vector<LayerHolding>> passes;
  double forward_seconds = 0;  // measured wall time of the layer (the slowest process's)
  double backward_seconds = 0;
  ExchangeMeasurement exchange;  // this process's all-to-all-v calls
  // This process's expert fetches and gradient returns (sharded expert state: fetch_experts),
  // host-timed; none with replicated experts.
  ExchangeMeasurement parameters;
  // every process's measurements (multi-process runs)
  std::vector<ProcessStepMeasurement> processes;
  PipelineOverhead overhead;                  // part of the two above
  double planning_seconds[kPhases] = {0, 0};  // the overhead by phase: the plan every rank computes
  // [phase]: each pass's plan on the host, where it lies (a step's timeline, `lrmoe trace`)
  std::vector<SpanInterval> plan_spans[kPhases];
  // [phase][rank]: each rank's timed expert work (this process's ranks; zero for the others).
  std::vector<double> rank_expert_seconds[kPhases];
  CriticalPath critical_path;  // of the whole step, over all processes (set by the trainer)
  ModeledTime modeled;         // cost model: the step's passes under the run's hardware profile
  // Per pass (micro-batch), in order, modeled: the replica gradients' return when it travels
  // behind the layers below (cluster.overlap_gradient_return; 0 otherwise) and the pass's
  // backward expert compute not already hiding its own chunks (PassAccount::backward_cover),
  // what the return of the layer above hides behind (hide_deferred_returns,
  // core/pipeline/deferred_returns.hpp).
  struct PassReturn {
    double deferred_return = 0;
    double backward_cover = 0;
  };
  std::vector<PassReturn> pass_returns;
  PlanCollectives plan;  // the step's passes' plan collectives
  // What forward_seconds, backward_seconds, exchange.seconds and rank_expert_seconds are read
  // from; those stay zero until read_times().
  LayerSpans spans;

  // Reads `spans` into the seconds above. `waited`: set when a read had to wait for the device.
  void read_times(bool* waited = nullptr);
};

}  // namespace lrmoe
