#pragma once
// What the benchmarks that train share: an experiment set up to run a few warm-up steps and
// then the timed ones without evaluating or stopping early, and an observer keeping every report.

#include <cstdint>
#include <vector>

#include "core/train/training_observer.hpp"
#include "run_command.hpp"

namespace lrmoe {

// Steps run before the timed ones (allocations, first-touch, the BLAS warming up).
constexpr int64_t kWarmupSteps = 3;

// The experiment of `source`, set to train kWarmupSteps + `steps` steps and evaluate only once.
inline Experiment timed_training_experiment(const ExperimentSource& source, int64_t steps) {
  Experiment e = load_experiment_source(source);
  e.train.max_steps = steps + kWarmupSteps;
  e.train.eval_every = e.train.max_steps;  // evaluation is excluded from step time anyway
  e.train.target_loss = 0;
  return e;
}

class CollectingObserver : public TrainingObserver {
 public:
  void on_step(const StepReport& report) override { reports.push_back(report); }
  // The reports after the warm-up steps.
  std::vector<StepReport> timed() const {
    return {reports.begin() + std::min<std::size_t>(kWarmupSteps, reports.size()), reports.end()};
  }

  std::vector<StepReport> reports;
};

}  // namespace lrmoe
