#pragma once
// Connects the trainer to the results store and the progress display: every step goes to both;
// the store is flushed at every evaluation and every few seconds, so a killed run loses at most
// that tail.

#include <chrono>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/train/training_observer.hpp"
#include "progress_display.hpp"
#include "store/results_store.hpp"

namespace lrmoe {

class RunRecorder : public TrainingObserver {
 public:
  // `progress`: where a person follows the run; none for runs that report otherwise (replays).
  RunRecorder(ResultsStore& store, int64_t run, ProgressDisplay* progress);
  void on_step(const StepReport& report) override;
  bool stop_requested() const override;
  // Commits every buffered row.
  void before_checkpoint(int64_t step) override;

 private:
  ResultsStore& store_;
  int64_t run_;
  // Writes the layer's replicas and the owners that moved since the last step (Note [Placement
  // trace] in docs/notes.md).
  void record_placement(int64_t step, const LayerStepStatistics& layer);

  ProgressDisplay* progress_;
  std::chrono::steady_clock::time_point last_flush_;
  // Per MoE layer, per expert: the (rank, slot) of its owner as last recorded.
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> owners_;
};

}  // namespace lrmoe
