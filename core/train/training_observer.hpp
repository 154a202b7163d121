#pragma once
// What the trainer reports after every optimizer step, and how the caller (the runner: progress
// display, results store, Ctrl-C) can ask it to stop. Core code knows nothing of the store.

#include <cstdint>
#include <optional>
#include <vector>

#include "core/device/step_peaks.hpp"
#include "core/pipeline/layer_statistics.hpp"
#include "core/pipeline/memory_timeline.hpp"
#include "core/train/trace_span.hpp"

namespace lrmoe {

struct LayerLoad {
  int64_t layer = 0;                      // block index of the MoE layer
  std::vector<int64_t> pairs_per_expert;  // token-expert pairs routed in this step
};

struct StepReport {
  int64_t step = 0;       // from 1
  double train_loss = 0;  // mean cross-entropy over the step's micro-batches (no aux loss)
  double aux_loss = 0;
  std::optional<double> eval_loss;  // set on evaluation steps
  double lr = 0;
  double grad_norm = 0;  // before clipping
  int64_t tokens = 0;
  double step_seconds = 0;  // forward, backward and optimizer; evaluation excluded
  // inside MoE layers, forward and backward: the slowest process's wall time
  double moe_seconds = 0;
  // The MoE layers' critical path: per layer and phase, the slowest logical rank (Note [Critical
  // path]); equal to moe_seconds without the pipeline.
  double moe_critical_seconds = 0;
  double moe_modeled_seconds = 0;  // cost model: the same MoE work under the run's hardware profile
  double cumulative_step_seconds = 0;
  double cumulative_moe_seconds = 0;
  double cumulative_moe_critical_seconds = 0;
  double cumulative_moe_modeled_seconds = 0;
  std::vector<LayerLoad> expert_load;
  // Per MoE layer, when training runs the pipeline (statistics.layer indexes MoE layers).
  std::vector<LayerStepStatistics> layers;
  // Per logical rank: the peak of its memory timeline over the step (Note [Memory model]);
  // empty without pipeline.
  std::vector<MemoryPeak> rank_memory;
  // Per logical rank: the CUDA caching allocator's peaks of allocated bytes over the step and
  // its phases on the device of the process hosting it (the ranks of one process share it);
  // none on the CPU.
  std::vector<std::optional<MeasuredPeaks>> rank_measured_peak;
  // On the steps train.trace_every names: every process's spans of the step (Note [Step trace]).
  std::vector<TraceSpan> trace;
};

class TrainingObserver {
 public:
  virtual ~TrainingObserver() = default;
  virtual void on_step(const StepReport& report) = 0;
  // Checked between steps: true ends the run early (recorded as stopped).
  virtual bool stop_requested() const { return false; }
  // Called after step `step`'s report and before its checkpoint is written: what the observer
  // keeps of the steps so far must be durable by then, so that a checkpoint is never ahead of
  // the record it continues (Note [Checkpoints]).
  virtual void before_checkpoint(int64_t step) { (void)step; }
};

}  // namespace lrmoe
