// The training loop: bit-for-bit determinism, reports read one step late and in order, gradient
// clipping on the device, the learning-rate schedule, vocabulary resolution.

#include <catch2/catch.hpp>

#include "core/config/model_presets.hpp"
#include "core/data/token_source.hpp"
#include "core/train/gradient_clipping.hpp"
#include "core/train/lr_schedule.hpp"
#include "core/train/trainer.hpp"
#include "support/recording_observer.hpp"
#include "support/tiny_training.hpp"

using namespace lrmoe;

namespace {

Experiment tiny_experiment(uint64_t seed) {
  Experiment e = lrmoe_test::tiny_training(seed);
  e.train.micro_batches = 2;
  return e;
}

struct Recording : lrmoe_test::RecordingObserver {
  TrainingOutcome outcome;
};

Recording train(const Experiment& e) {
  auto data = make_token_source(e.data, e.experiment.seed, e.train.seq_len);
  Trainer trainer(e, *data);
  Recording recording;
  recording.outcome = trainer.run(recording);
  return recording;
}

}  // namespace

TEST_CASE("the same experiment and seed give the same losses bit for bit", "[training]") {
  Recording first = train(tiny_experiment(42));
  Recording second = train(tiny_experiment(42));
  REQUIRE(first.losses.size() == 4);
  REQUIRE(first.eval_losses.size() == 2);
  CHECK(first.losses == second.losses);  // exact equality of doubles
  CHECK(first.grad_norms == second.grad_norms);
  CHECK(first.eval_losses == second.eval_losses);
  REQUIRE(first.loads.back().size() == 2);  // tiny-moe: two MoE layers
  CHECK(first.loads.back()[0].pairs_per_expert == second.loads.back()[0].pairs_per_expert);

  Recording other_seed = train(tiny_experiment(43));
  CHECK(other_seed.losses != first.losses);
}

TEST_CASE(
    "every step is reported once, in order, up to the step whose evaluation reached the "
    "target",
    "[training]") {
  Experiment e = tiny_experiment(7);
  e.train.max_steps = 6;
  e.train.eval_every = 5;
  e.train.target_loss = 100;  // any evaluation reaches it
  const Recording r = train(e);
  // Step 1's training loss is read after step 2 is queued, so the first near-target evaluation
  // follows step 2 (Note [Device timing]).
  CHECK(r.steps == std::vector<int64_t>{1, 2});
  REQUIRE(r.outcome.target);
  CHECK(r.outcome.reason == StopReason::TargetReached);
  CHECK(r.outcome.target->step == 2);
  CHECK(r.outcome.steps == 2);
  REQUIRE(r.eval_losses.size() == 1);
  CHECK(r.outcome.final_eval_loss == r.eval_losses.back());
  CHECK(r.outcome.final_train_loss == r.losses.back());
  CHECK(r.outcome.step_seconds == r.cumulative_step_seconds.back());
  CHECK(r.outcome.target->step_seconds == r.cumulative_step_seconds.back());
  CHECK(r.cumulative_step_seconds[1] > r.cumulative_step_seconds[0]);
}

TEST_CASE("gradients are clipped on the device as LibTorch's clip_grad_norm_ clips them",
          "[training]") {
  torch::manual_seed(3);
  auto make = [] {
    std::vector<torch::Tensor> parameters;
    for (int64_t n : {5, 12, 1}) {
      auto p = torch::zeros({n}, torch::requires_grad());
      p.mutable_grad() = torch::randn({n});
      parameters.push_back(p);
    }
    parameters.push_back(torch::zeros({3}, torch::requires_grad()));  // no gradient
    return parameters;
  };
  const std::vector<torch::Tensor> ours = make();
  std::vector<torch::Tensor> theirs;
  for (const torch::Tensor& p : ours) {
    auto copy = p.detach().clone().requires_grad_(true);
    if (p.grad().defined()) copy.mutable_grad() = p.grad().clone();
    theirs.push_back(copy);
  }
  for (double max_norm : {0.5, 1e9}) {
    const double expected = torch::nn::utils::clip_grad_norm_(theirs, max_norm);
    const torch::Tensor norm = clip_gradient_norm(ours, max_norm);
    CHECK(norm.dim() == 0);
    CHECK(norm.item<double>() == Approx(expected).epsilon(1e-6));
    for (std::size_t i = 0; i + 1 < ours.size(); ++i)
      CHECK(ours[i].grad().allclose(theirs[i].grad(), 1e-6, 1e-7));
  }
  CHECK(clip_gradient_norm({torch::zeros({2})}, 1.0).item<double>() == 0.0);
}

TEST_CASE("every step records the routed pairs of every MoE layer", "[training]") {
  Experiment e = tiny_experiment(1);
  Recording r = train(e);
  const int64_t pairs =
      e.train.batch_size * e.train.micro_batches * e.train.seq_len * e.model.top_k;
  for (const auto& step : r.loads) {
    for (const LayerLoad& layer : step) {
      REQUIRE(layer.pairs_per_expert.size() == static_cast<size_t>(e.model.num_experts));
      int64_t total = 0;
      for (int64_t n : layer.pairs_per_expert) total += n;
      CHECK(total == pairs);
    }
  }
}

TEST_CASE("learning rate: linear warm-up then cosine decay to min_lr", "[training]") {
  TrainConfig t;
  t.lr = 1.0;
  t.min_lr = 0.1;
  t.warmup_steps = 10;
  t.max_steps = 110;
  CHECK(learning_rate(t, 1) == Approx(0.1));
  CHECK(learning_rate(t, 10) == Approx(1.0));
  CHECK(learning_rate(t, 60) == Approx(0.55));
  CHECK(learning_rate(t, 110) == Approx(0.1));
  t.warmup_steps = 0;
  CHECK(learning_rate(t, 1) == Approx(1.0).epsilon(1e-3));
}

TEST_CASE("the model vocabulary comes from the data unless set, and must hold it", "[training]") {
  ModelConfig m = *find_preset("tiny-moe");
  CHECK(resolve_model_vocabulary(m, 300).vocab_size == 300);
  m.vocab_size = 256;
  CHECK(resolve_model_vocabulary(m, 200).vocab_size == 256);
  CHECK_THROWS_WITH(resolve_model_vocabulary(m, 300), Catch::Contains("raise model.vocab_size"));
}
