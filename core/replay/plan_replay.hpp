#pragma once
// A training step's plans without the training (Note [Replay] in docs/notes.md): every MoE layer
// of the experiment's model, at its full dimensions, runs the same ExpertPipeline as training
// over R logical ranks (placement, forward capacity, routing, metric, selection, the budget
// checks, the memory timeline and the cost model), on pairs made from an ExpertLoads source.
// Nothing is allocated for weights, activations or rows, so a 30B-parameter model on 16 ranks
// replays on one CPU.
//
// Each step yields a StepReport as the trainer's does, so the runner records it the same way;
// what only training measures (losses, learning rate, gradient norm, wall times) is NaN, which
// the store keeps as NULL.
//
// The run's P processes are P threads of this one, each with its own pipelines and Collectives
// (in memory: core/distributed/thread_meeting.hpp), each planning its own ranks' pairs as the
// process would: under policies.planning = "scalable" from its pairs and summed counts, under
// "exact" from every pair it gathers. The plan's parts are timed by each thread's CPU time
// (PlanClock::ThreadCpu), what the process would spend on a core of its own, which counts all of
// a part's work only when LibTorch runs it in that thread (`lrmoe replay` sets one intra-op
// thread); a step's plan time is its slowest process's. With P = 1 there is no thread and no
// collective.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config/experiment.hpp"
#include "core/cost/cost_model.hpp"
#include "core/pipeline/expert_pipeline.hpp"
#include "core/pipeline/rank_budget.hpp"
#include "core/plugins/policy_set.hpp"
#include "core/replay/expert_loads.hpp"
#include "core/train/training_observer.hpp"

namespace lrmoe {

// Why `processes` cannot replay `experiment`, or "" when it can: the model must have MoE layers,
// and `processes` must divide cluster.ranks (each process hosts as many ranks) and a
// micro-batch's tokens (each homes as many).
std::string replay_problem(const Experiment& experiment, int64_t processes);

class PlanReplay {
 public:
  // `experiment.model` must be resolved (vocabulary known). Throws PlanError when
  // cluster.memory_per_rank does not hold the dense and optimizer state. `moe_layers` > 0
  // replays only the model's first that many MoE layers (each within the whole model's budget).
  // `processes` must divide cluster.ranks and a micro-batch's tokens (replay_problem).
  PlanReplay(const Experiment& experiment, std::shared_ptr<const PolicySet> policies,
             HardwareProfile profile, std::shared_ptr<const ExpertLoads> loads,
             int64_t moe_layers = 0, int64_t processes = 1);

  // Step `step` (from 1, in order: placements see earlier steps' counts): train.micro_batches
  // passes of every MoE layer. Throws PlanError, with the step, layer and numbers, when a plan
  // does not fit the budget. The report's layers are process 0's (every process agrees on the
  // plan's figures), with the planning time of the process that planned longest.
  StepReport step(int64_t step);

  const RankBudget& budget() const { return budget_; }
  // Bytes per expert and per pair of the model's MoE layers (Note [Memory model]).
  const MemoryCosts& memory_costs() const { return memory_costs_; }

 private:
  Experiment experiment_;
  std::shared_ptr<const ExpertLoads> loads_;
  RankBudget budget_;
  HardwareProfile profile_;
  MemoryCosts memory_costs_;
  // One replayed process: its Collectives and a pipeline per MoE layer.
  struct Process {
    std::shared_ptr<Collectives> collectives;
    std::vector<std::shared_ptr<ExpertPipeline>> pipelines;
  };
  std::vector<Process> processes_;
  double cumulative_modeled_ = 0;
};

}  // namespace lrmoe
