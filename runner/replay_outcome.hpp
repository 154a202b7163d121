#pragma once
// What one policy variant's replay showed (`lrmoe replay`, Note [Replay] in docs/notes.md): its
// steps' figures gathered as they come, and the tables that print them.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/replay/allocated_timeline.hpp"
#include "core/train/training_observer.hpp"

namespace lrmoe {

// What one variant's replay showed.
struct ReplayOutcome {
  std::string label;
  std::string policies;
  std::optional<int64_t> run;         // with --record
  std::optional<std::string> failed;  // the plan that did not fit, and why
  int64_t steps = 0;                  // replayed in full
  bool stopped = false;               // by Ctrl-C, after `steps`
  int64_t memory_per_rank = 0;
  std::vector<int64_t> subtotal, total;  // [ranks]: the peak over the steps
  // [ranks]: the largest subtotal of one MoE layer on its own (layer_subtotal_bytes)
  std::vector<int64_t> layer_subtotal;
  // The pass with the largest modeled total of any rank: that rank's holdings per MoE layer.
  std::vector<LayerHolding> busiest_pass;
  int64_t busiest_rank = 0;
  int64_t busiest_total = -1;
  MemoryCosts costs;   // per expert and per pair of the variant's model
  StaticMemory fixed;  // its dense and optimizer state
  // With --allocate: the allocator's peak for the busiest pass, or why there is none.
  std::optional<AllocatedPeak> allocated;
  std::optional<std::string> allocation_failed;
  // Per-step figures, summed over the steady steps: those in which no layer's placement was
  // warming up (PlanInformation::WarmUp), which are summed apart.
  double replicas = 0;  // summed over steps and layers
  int64_t layer_steps = 0;
  int64_t routed = 0, dropped = 0, kept = 0;
  double modeled = 0;           // MoE seconds, summed over steps
  double planning = 0;          // wall seconds of the plans on this machine, summed over steps
  PipelineOverhead plan_parts;  // the same by part
  // bytes moved (all-to-alls and replica traffic), and of them between nodes, summed over steps
  double moved_bytes = 0, cross_node_bytes = 0;
  int64_t steady_steps = 0;
  int64_t warm_up_steps = 0;
  double warm_up_modeled = 0;
  int64_t warm_up_routed = 0, warm_up_dropped = 0;
  // Over every step: the most instances one rank hosted in one layer (the slots a placement
  // used), and the most replica bytes one rank held at its peak.
  int64_t most_instances = 0;
  int64_t most_replica_bytes = 0;
};

// Adds one replayed step's figures. `o.costs` and `o.fixed` must be set.
void add_replay_step(ReplayOutcome& o, const StepReport& report);

// The summary table (one row per variant), the plans that did not fit, --allocate's figures and
// every rank's peaks.
void print_replay_outcomes(const std::vector<ReplayOutcome>& outcomes, std::ostream& out);

}  // namespace lrmoe
