#include "core/train/trainer.hpp"

#include <chrono>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/pipeline/expert_counts.hpp"
#include "core/system/blas_probe.hpp"
#include "core/system/threads.hpp"
#include "core/train/lr_schedule.hpp"

namespace lrmoe {
namespace {

double seconds_since(std::chrono::steady_clock::time_point started) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

torch::Tensor cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}).to(torch::kFloat32),
                                              targets.reshape({-1}));
}

// Weight decay applies to matrices only, not to norms, biases or the router's buffers.
std::unique_ptr<torch::optim::AdamW> make_optimizer(torch::nn::Module& model, const TrainConfig& t) {
  std::vector<torch::Tensor> decayed, plain;
  for (auto& p : model.parameters()) (p.dim() >= 2 ? decayed : plain).push_back(p);
  auto options = torch::optim::AdamWOptions(t.lr).betas({t.beta1, t.beta2}).eps(t.eps).weight_decay(t.weight_decay);
  auto no_decay = options;
  no_decay.weight_decay(0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decayed, std::make_unique<torch::optim::AdamWOptions>(options));
  groups.emplace_back(plain, std::make_unique<torch::optim::AdamWOptions>(no_decay));
  return std::make_unique<torch::optim::AdamW>(std::move(groups), options);
}

}  // namespace

ModelConfig resolve_model_vocabulary(const ModelConfig& model, int64_t data_vocab_size) {
  ModelConfig resolved = model;
  if (resolved.vocab_size == 0) {
    resolved.vocab_size = data_vocab_size;
  } else if (data_vocab_size > resolved.vocab_size) {
    throw std::invalid_argument("the data has a vocabulary of " + std::to_string(data_vocab_size) +
                                " tokens but model.vocab_size is " + std::to_string(resolved.vocab_size) +
                                ": raise model.vocab_size or set it to 0 to take the data's");
  }
  return resolved;
}

Trainer::Trainer(const Experiment& experiment, const TokenSource& data, std::shared_ptr<const PolicySet> policies,
                 std::shared_ptr<Collectives> collectives)
    : experiment_(experiment),
      data_(data),
      collectives_(collectives ? std::move(collectives) : std::make_shared<Collectives>()),
      shard_{collectives_->rank(), collectives_->size()} {
  configure_threads(experiment.train.threads);
  torch::manual_seed(experiment.experiment.seed);
  model_config_ = resolve_model_vocabulary(experiment.model, data.vocab_size());
  model_ = Transformer(model_config_);
  optimizer_ = make_optimizer(*model_, experiment.train);
  if (policies) install_pipelines(std::move(policies));
}

void Trainer::install_pipelines(std::shared_ptr<const PolicySet> policies) {
  const PairCosts costs = pair_costs(model_config_, experiment_.policies.recompute);
  budget_ = lrmoe::rank_budget(model_config_, experiment_.train, experiment_.cluster, costs);
  const double gemm_flops = experiment_.cluster.gemm_flops > 0 ? 0.0 : probe_blas().matmul_gflops * 1e9;
  const auto& layers = model_->moe_layers();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    PipelineSettings settings =
        pipeline_settings(experiment_, model_config_, static_cast<int64_t>(i), budget_, gemm_flops);
    settings.process.index = collectives_->rank();
    settings.process.processes = collectives_->size();
    auto pipeline = std::make_shared<ExpertPipeline>(policies, settings, collectives_);
    MoELayer layer = layers[i];
    layer->set_pipeline(pipeline);
    pipelines_.push_back(std::move(pipeline));
  }
}

StepReport Trainer::train_step(int64_t step) {
  const TrainConfig& t = experiment_.train;
  const auto started = std::chrono::steady_clock::now();
  model_->train();
  StepReport report;
  report.step = step;
  report.lr = learning_rate(t, step);
  for (auto& group : optimizer_->param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(report.lr);
  }

  for (const auto& pipeline : pipelines_) pipeline->set_step(step);
  optimizer_->zero_grad();
  // Each process's loss is the mean over its shard; their mean is the batch's.
  const auto processes = static_cast<double>(collectives_->size());
  for (int64_t micro = 0; micro < t.micro_batches; ++micro) {
    Batch batch = data_.train_batch(step, micro, t.batch_size, shard_);
    ModelOutput out = model_(batch.inputs);
    auto ce = cross_entropy(out.logits, batch.targets);
    ((ce + out.aux_loss) / (static_cast<double>(t.micro_batches) * processes)).backward();
    report.train_loss += ce.item<double>() / static_cast<double>(t.micro_batches);
    report.aux_loss += out.aux_loss.item<double>() / static_cast<double>(t.micro_batches);
    report.tokens += batch.inputs.numel() * collectives_->size();
  }
  sum_gradients();
  report.train_loss = process_mean(report.train_loss);
  report.aux_loss = process_mean(report.aux_loss);
  const double max_norm = t.grad_clip > 0 ? t.grad_clip : std::numeric_limits<double>::infinity();
  report.grad_norm = torch::nn::utils::clip_grad_norm_(model_->parameters(), max_norm);
  optimizer_->step();

  const auto& layers = model_->moe_layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    MoELayer layer = layers[i];  // a handle; the list itself is const
    auto counts = layer->router()->take_step_counts();
    layer->router()->update_selection_bias(counts);
    report.expert_load.push_back({model_->moe_layer_indices()[i], int64_values(counts)});
    LayerStepStatistics statistics = layer->take_statistics();
    report.moe_seconds += statistics.forward_seconds + statistics.backward_seconds;
    report.moe_modeled_seconds += statistics.modeled_seconds;
    if (!pipelines_.empty()) report.layers.push_back(std::move(statistics));
  }
  if (!pipelines_.empty()) {
    report.rank_memory.assign(static_cast<std::size_t>(experiment_.cluster.ranks), RankMemory{});
    for (RankMemory& rank : report.rank_memory) rank.dense = budget_.dense_bytes;
    for (const LayerStepStatistics& layer : report.layers) {
      for (std::size_t r = 0; r < layer.memory.size(); ++r) report.rank_memory[r] += layer.memory[r];
    }
  }
  report.step_seconds = seconds_since(started);
  gather_measurements(report);
  return report;
}

void Trainer::sum_gradients() {
  if (collectives_->single()) return;
  std::vector<torch::Tensor> grads;
  for (auto& p : model_->parameters()) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad().reshape({-1}));
  }
  // One collective for all of them: one flat buffer.
  torch::Tensor flat = torch::cat(grads);
  collectives_->sum(flat);
  int64_t offset = 0;
  for (auto& p : model_->parameters()) {
    p.mutable_grad().copy_(flat.narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
}

bool Trainer::stop_requested(const TrainingObserver& observer) {
  // Every process stops after the same step, or the others would wait for it forever.
  torch::Tensor stop = torch::tensor({observer.stop_requested() ? 1 : 0}, torch::kInt64);
  collectives_->max(stop);
  return stop.item<int64_t>() != 0;
}

double Trainer::process_mean(double value) {
  if (collectives_->single()) return value;
  torch::Tensor total = torch::tensor({value}, torch::kFloat64);
  collectives_->sum(total);
  return total.item<double>() / static_cast<double>(collectives_->size());
}

void Trainer::gather_measurements(StepReport& report) {
  if (collectives_->single() || report.layers.empty()) return;
  constexpr int64_t kFields = 6;
  const auto layers = static_cast<int64_t>(report.layers.size());
  torch::Tensor local = torch::empty({1, layers * kFields + 1}, torch::kFloat64);
  auto* values = local.data_ptr<double>();
  for (int64_t l = 0; l < layers; ++l) {
    const LayerStepStatistics& s = report.layers[l];
    const double fields[kFields] = {s.forward_seconds,
                                    s.backward_seconds,
                                    static_cast<double>(s.exchange.bytes_sent),
                                    static_cast<double>(s.exchange.bytes_received),
                                    s.exchange.seconds,
                                    static_cast<double>(s.exchange.calls)};
    std::copy(fields, fields + kFields, values + l * kFields);
  }
  values[layers * kFields] = report.step_seconds;
  // [processes, ...]: one row from each.
  const torch::Tensor all = collectives_->gather_rows(local, std::vector<int64_t>(collectives_->size(), 1));
  const auto* rows = all.data_ptr<double>();
  const int64_t width = all.size(1);

  report.moe_seconds = 0;
  for (int64_t l = 0; l < layers; ++l) {
    LayerStepStatistics& s = report.layers[l];
    s.processes.clear();
    for (int64_t p = 0; p < all.size(0); ++p) {
      const double* f = rows + p * width + l * kFields;
      ProcessStepMeasurement m;
      m.process = p;
      m.forward_seconds = f[0];
      m.backward_seconds = f[1];
      m.exchange.bytes_sent = static_cast<int64_t>(f[2]);
      m.exchange.bytes_received = static_cast<int64_t>(f[3]);
      m.exchange.seconds = f[4];
      m.exchange.calls = static_cast<int64_t>(f[5]);
      s.forward_seconds = std::max(s.forward_seconds, m.forward_seconds);
      s.backward_seconds = std::max(s.backward_seconds, m.backward_seconds);
      s.processes.push_back(m);
    }
    report.moe_seconds += s.forward_seconds + s.backward_seconds;
  }
  for (int64_t p = 0; p < all.size(0); ++p) report.step_seconds = std::max(report.step_seconds, rows[p * width + width - 1]);
}

double Trainer::evaluate() {
  torch::NoGradGuard no_grad;
  model_->eval();
  double total = 0;
  for (int64_t i = 0; i < experiment_.train.eval_batches; ++i) {
    Batch batch = data_.val_batch(i, experiment_.train.batch_size, shard_);
    total += cross_entropy(model_(batch.inputs).logits, batch.targets).item<double>();
  }
  // Evaluation time is not training time: drop what the MoE layers' clocks saw.
  for (MoELayer layer : model_->moe_layers()) layer->take_statistics();
  return process_mean(total / static_cast<double>(experiment_.train.eval_batches));
}

TrainingOutcome Trainer::run(TrainingObserver& observer) {
  const TrainConfig& t = experiment_.train;
  TrainingOutcome outcome;
  for (int64_t step = 1; step <= t.max_steps; ++step) {
    StepReport report = train_step(step);
    outcome.steps = step;
    outcome.step_seconds += report.step_seconds;
    outcome.moe_seconds += report.moe_seconds;
    outcome.moe_modeled_seconds += report.moe_modeled_seconds;
    outcome.tokens += report.tokens;
    outcome.final_train_loss = report.train_loss;
    report.cumulative_step_seconds = outcome.step_seconds;
    report.cumulative_moe_seconds = outcome.moe_seconds;
    report.cumulative_moe_modeled_seconds = outcome.moe_modeled_seconds;

    if (step % t.eval_every == 0 || step == t.max_steps) {
      report.eval_loss = evaluate();
      outcome.final_eval_loss = report.eval_loss;
      if (t.target_loss > 0 && *report.eval_loss <= t.target_loss && !outcome.target) {
        outcome.target = TargetReached{step, outcome.step_seconds, outcome.moe_seconds, outcome.moe_modeled_seconds};
      }
    }
    observer.on_step(report);
    if (outcome.target) {
      outcome.reason = StopReason::TargetReached;
      return outcome;
    }
    if (stop_requested(observer)) {
      outcome.reason = StopReason::Stopped;
      return outcome;
    }
  }
  outcome.reason = StopReason::MaxSteps;
  return outcome;
}

}  // namespace lrmoe
