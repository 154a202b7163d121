#pragma once
// A training observer that keeps what each step reported, for tests that compare runs.

#include <cstdint>
#include <vector>

#include "core/train/training_observer.hpp"

namespace lrmoe_test {

struct RecordingObserver : lrmoe::TrainingObserver {
  void on_step(const lrmoe::StepReport& r) override {
    steps.push_back(r.step);
    losses.push_back(r.train_loss);
    grad_norms.push_back(r.grad_norm);
    cumulative_step_seconds.push_back(r.cumulative_step_seconds);
    if (r.eval_loss) eval_losses.push_back(*r.eval_loss);
    loads.push_back(r.expert_load);
    if (!r.layers.empty()) kept.push_back(r.layers.front().pairs_kept);
  }
  std::vector<int64_t> steps;
  std::vector<double> losses, grad_norms, eval_losses, cumulative_step_seconds;
  std::vector<std::vector<lrmoe::LayerLoad>> loads;
  std::vector<int64_t> kept;  // the first MoE layer's kept pairs, with the pipeline
};

}  // namespace lrmoe_test
