#pragma once
// Connects the trainer to the results store and the progress display: every step goes to both;
// the store is flushed at every evaluation and every few seconds, so a killed run loses at most
// that tail.

#include <chrono>
#include <cstdint>

#include "core/train/training_observer.hpp"
#include "progress_display.hpp"
#include "store/results_store.hpp"

namespace lrmoe {

class RunRecorder : public TrainingObserver {
 public:
  RunRecorder(ResultsStore& store, int64_t run, ProgressDisplay& progress);
  void on_step(const StepReport& report) override;
  bool stop_requested() const override;

 private:
  ResultsStore& store_;
  int64_t run_;
  ProgressDisplay& progress_;
  std::chrono::steady_clock::time_point last_flush_;
};

}  // namespace lrmoe
