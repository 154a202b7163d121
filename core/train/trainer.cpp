#include "core/train/trainer.hpp"

#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

#include "core/device/compute_device.hpp"
#include "core/device/step_peaks.hpp"
#include "core/hf/hf_import.hpp"
#include "core/pipeline/deferred_returns.hpp"
#include "core/system/threads.hpp"
#include "core/train/gradient_clipping.hpp"
#include "core/train/lr_schedule.hpp"
#include "core/train/step_trace.hpp"

namespace lrmoe {
namespace {

torch::Tensor cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}).to(torch::kFloat32), targets.reshape({-1}));
}

// Weight decay applies to matrices only, not to norms, biases or the router's buffers. None
// without parameters.
std::unique_ptr<torch::optim::AdamW> make_optimizer(const std::vector<torch::Tensor>& parameters,
                                                    const TrainConfig& t) {
  if (parameters.empty()) return nullptr;
  std::vector<torch::Tensor> decayed, plain;
  for (const auto& p : parameters) (p.dim() >= 2 ? decayed : plain).push_back(p);
  auto options = torch::optim::AdamWOptions(t.lr)
                     .betas({t.beta1, t.beta2})
                     .eps(t.eps)
                     .weight_decay(t.weight_decay);
  auto no_decay = options;
  no_decay.weight_decay(0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (!decayed.empty())
    groups.emplace_back(decayed, std::make_unique<torch::optim::AdamWOptions>(options));
  if (!plain.empty())
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
                                " tokens but model.vocab_size is " +
                                std::to_string(resolved.vocab_size) +
                                ": raise model.vocab_size or set it to 0 to take the data's");
  }
  return resolved;
}

Trainer::Trainer(const Experiment& experiment, const TokenSource& data,
                 std::shared_ptr<const PolicySet> policies,
                 std::shared_ptr<Collectives> collectives, std::optional<HardwareProfile> profile)
    : experiment_(experiment),
      data_(data),
      collectives_(collectives ? std::move(collectives) : std::make_shared<Collectives>()),
      device_(resolve_device(experiment.train.device, collectives_->local_rank())),
      shard_{collectives_->rank(), collectives_->size()} {
  configure_threads(experiment.train.threads);
  torch::manual_seed(experiment.experiment.seed);
  model_config_ = resolve_model_vocabulary(experiment.model, data.vocab_size());
  const torch::ScalarType dtype = compute_dtype(experiment.train.precision);
  grouped_gemm_ =
      choose_grouped_gemm_kernel(experiment.train.grouped_gemm, device_, dtype, model_config_);
  set_grouped_gemm_kernel(grouped_gemm_.kernel);
  // Initialised on the CPU, from the seeded CPU generator, then moved: the same weights on
  // every device. The optimizer's state is created on the device at its first step.
  // Without the policies' pipeline nothing fetches an expert a process does not hold: one
  // process holds every expert either way, several must replicate them.
  const bool sharded_asked = experiment.cluster.expert_state == ExpertState::Sharded;
  const bool sharded = sharded_asked && policies;
  if (sharded_asked && !policies && !collectives_->single()) {
    throw std::invalid_argument(
        "cluster.expert_state = \"sharded\" needs the policies' pipeline, which fetches the "
        "experts a process does not hold: train with policies, or set it to \"replicated\"");
  }
  std::optional<ExpertShard> shard;
  if (sharded) {
    const ProcessView view{collectives_->rank(), collectives_->size(),
                           experiment.cluster.ranks / collectives_->size()};
    shard = home_shard(model_config_.num_experts, experiment.cluster.ranks, view, view.index);
  }
  model_ = Transformer(model_config_, shard);
  if (!model_config_.init_from.empty()) start_from_hf_weights();
  model_->to(device_);
  split_parameters(sharded);
  model_->set_compute_dtype(dtype);
  optimizer_ = make_optimizer(replicated_parameters_, experiment.train);
  expert_optimizer_ = make_optimizer(sharded_parameters_, experiment.train);
  if (policies) install_pipelines(std::move(policies), std::move(profile));
}

void Trainer::start_from_hf_weights() {
  const HfImport import = load_hf_weights(model_, model_config_, model_config_.init_from);
  spdlog::info("model.init_from {}: {} tensors, {:.1f} MiB read in {:.2f} s",
               model_config_.init_from, import.tensors,
               static_cast<double>(import.bytes) / (1 << 20), import.seconds);
  if (!import.unused.empty()) {
    spdlog::warn(
        "model.init_from {}: {} of its tensors have no place in this model and were not "
        "read (the first: {})",
        model_config_.init_from, import.unused.size(), import.unused.front());
  }
}

void Trainer::split_parameters(bool sharded) {
  std::set<const torch::TensorImpl*> experts;
  for (MoELayer layer : model_->moe_layers())
    for (const torch::Tensor& p : layer->expert_parameters())
      experts.insert(p.unsafeGetTensorImpl());
  int64_t counts[2] = {0, 0};  // dense, experts
  for (const torch::Tensor& p : model_->parameters()) {
    const bool expert = experts.count(p.unsafeGetTensorImpl()) > 0;
    (sharded && expert ? sharded_parameters_ : replicated_parameters_).push_back(p);
    counts[expert ? 1 : 0] += p.numel();
  }
  const torch::Tensor mine = torch::tensor({counts[0], counts[1]}, torch::kInt64).reshape({1, 2});
  const torch::Tensor all =
      collectives_->gather_rows(mine, std::vector<int64_t>(collectives_->size(), 1));
  for (int64_t p = 0; p < all.size(0); ++p)
    process_states_.push_back({all[p][0].item<int64_t>(), all[p][1].item<int64_t>()});
}

void Trainer::install_pipelines(std::shared_ptr<const PolicySet> policies,
                                std::optional<HardwareProfile> profile) {
  policies_ = policies;
  const PairCosts costs = pair_costs(model_config_, experiment_);
  budget_ = lrmoe::rank_budget(model_config_, experiment_.train, experiment_.cluster, costs,
                               experiment_.policies.optimizer_state);
  profile_ = profile
                 ? std::move(*profile)
                 : resolve_hardware_profile(experiment_.cluster.profile, experiment_.cluster.ranks);
  const auto& layers = model_->moe_layers();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    PipelineSettings settings =
        pipeline_settings(experiment_, model_config_, static_cast<int64_t>(i), budget_, profile_);
    settings.process.index = collectives_->rank();
    settings.process.processes = collectives_->size();
    auto pipeline = std::make_shared<ExpertPipeline>(policies, settings, collectives_);
    MoELayer layer = layers[i];
    layer->set_pipeline(pipeline);
    pipelines_.push_back(std::move(pipeline));
  }
}

Trainer::QueuedStep Trainer::train_step(int64_t step) {
  const TrainConfig& t = experiment_.train;
  step_timer_.start(device_);
  model_->train();
  QueuedStep queued;
  queued.report.step = step;
  queued.report.lr = learning_rate(t, step);
  for (torch::optim::Optimizer* optimizer : optimizers()) {
    for (auto& group : optimizer->param_groups())
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(queued.report.lr);
  }

  for (const auto& pipeline : pipelines_) pipeline->set_step(step);
  StepPeaks peaks(device_);
  // Gradients start undefined, in both LibTorch versions (1.13's zero_grad zeroes them in place,
  // 2.x's drops them): the first micro-batch's backward then takes each gradient as computed
  // instead of adding it into a zeroed buffer, which held a second copy of every weight
  // gradient at once (Note [Memory model]).
  for (const torch::Tensor& p : model_->parameters()) p.mutable_grad().reset();
  // Each process's loss is the mean over its shard; their mean is the batch's. The losses stay
  // on the device: [train, aux] float64, the means over the micro-batches.
  const auto processes = static_cast<double>(collectives_->size());
  const auto micro_batches = static_cast<double>(t.micro_batches);
  torch::Tensor losses = torch::zeros({2}, torch::dtype(torch::kFloat64).device(device_));
  for (int64_t micro = 0; micro < t.micro_batches; ++micro) {
    Batch batch = data_.train_batch(step, micro, t.batch_size, shard_).to(device_);
    ModelOutput out = model_(batch.inputs);
    auto ce = cross_entropy(out.logits, batch.targets);
    peaks.end_forward();
    ((ce + out.aux_loss) / (micro_batches * processes)).backward();
    peaks.end_backward();
    losses +=
        torch::stack({ce.detach().to(torch::kFloat64), out.aux_loss.detach().to(torch::kFloat64)}) /
        micro_batches;
    queued.report.tokens += batch.inputs.numel() * collectives_->size();
  }
  finish_gradient_returns();
  sum_gradients();
  const double max_norm = t.grad_clip > 0 ? t.grad_clip : std::numeric_limits<double>::infinity();
  const torch::Tensor grad_norm =
      sharded_parameters_.empty()
          ? clip_gradient_norm(replicated_parameters_, max_norm)
          : clip_gradient_norm(replicated_parameters_, sharded_parameters_, max_norm,
                               [&](torch::Tensor& squares) { collectives_->sum(squares); });
  for (torch::optim::Optimizer* optimizer : optimizers()) optimizer->step();

  // The figures the report reads from the device, queued for the host in one copy: the losses,
  // the gradient norm, then every MoE layer's per-expert pair counts.
  std::vector<torch::Tensor> figures{losses, grad_norm.to(device_, torch::kFloat64).reshape({1})};
  for (MoELayer layer : model_->moe_layers()) {
    const torch::Tensor counts = layer->router()->take_step_counts();
    layer->router()->update_selection_bias(counts);
    figures.push_back(counts.to(torch::kFloat64));
    queued.layers.push_back(layer->take_statistics());
  }
  queued.figures = HostReadback(torch::cat(figures));
  queued.measured = peaks.finish();
  step_timer_.stop();
  queued.step_time = step_timer_.take();
  return queued;
}

Trainer::ForwardBackward Trainer::forward_backward(const Batch& batch) {
  model_->train();
  for (const auto& pipeline : pipelines_) pipeline->set_step(1);
  for (const torch::Tensor& p : model_->parameters()) p.mutable_grad().reset();
  const Batch on_device = batch.to(device_);
  ModelOutput out = model_(on_device.inputs);
  const torch::Tensor ce = cross_entropy(out.logits, on_device.targets);
  // Each process's loss is its shard's mean: their mean is the batch's.
  (ce / static_cast<double>(collectives_->size())).backward();
  finish_gradient_returns();
  sum_gradients();
  for (MoELayer layer : model_->moe_layers()) {
    (void)layer->router()->take_step_counts();
    (void)layer->take_statistics();
  }
  return {out.logits.detach(), ce.detach()};
}

std::vector<std::pair<std::string, torch::Tensor>> Trainer::named_tensors() const {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& item : model_->named_parameters()) named.emplace_back(item.key(), item.value());
  for (const auto& item : model_->named_buffers()) named.emplace_back(item.key(), item.value());
  return named;
}

StepReport Trainer::read_step(QueuedStep queued) {
  StepReport report = std::move(queued.report);
  bool waited = false;
  const torch::Tensor figures = queued.figures.read(&waited);
  const auto* values = figures.data_ptr<double>();
  // Process means of the losses, in one collective of host values.
  const std::vector<double> losses = process_means({values[0], values[1]});
  report.train_loss = losses[0];
  report.aux_loss = losses[1];
  report.grad_norm = values[2];
  const double* counts = values + 3;
  for (int64_t layer : model_->moe_layer_indices()) {
    std::vector<int64_t> pairs;
    for (int64_t e = 0; e < model_config_.num_experts; ++e)
      pairs.push_back(static_cast<int64_t>(*counts++));
    report.expert_load.push_back({layer, std::move(pairs)});
  }
  report.step_seconds = queued.step_time.read(&waited);
  for (LayerStepStatistics& statistics : queued.layers) statistics.read_times(&waited);
  hide_deferred_returns(queued.layers);
  if (experiment_.train.traces(report.step)) {
    report.trace = gather_trace(
        *collectives_, process_trace(queued.layers, queued.step_time, collectives_->rank()));
  }
  for (LayerStepStatistics& statistics : queued.layers) {
    report.moe_seconds += statistics.forward_seconds + statistics.backward_seconds;
    report.moe_modeled_seconds += statistics.modeled.total();
    if (!pipelines_.empty()) report.layers.push_back(std::move(statistics));
  }
  if (waited) ++timing_waits_;
  report.moe_critical_seconds = report.moe_seconds;
  if (!pipelines_.empty()) {
    report.rank_memory =
        step_memory_peaks(pipelines_.front()->settings().costs.memory, report.layers,
                          StaticMemory{budget_.optimizer_bytes, budget_.dense_bytes});
  }
  gather_measurements(report, queued.measured);
  return report;
}

void Trainer::finish_gradient_returns() {
  for (MoELayer layer : model_->moe_layers()) layer->finish_gradient_returns();
}

// Replica gradients are already in their experts'; the sum adds every process's contributions,
// so every process takes the same step (Note [Exact multi-process plan] in docs/notes.md).
// Sharded experts' gradients are summed at their homes already (fetch_experts) and stay out.
void Trainer::sum_gradients() {
  if (collectives_->single()) return;
  std::vector<torch::Tensor> grads;
  for (auto& p : replicated_parameters_) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad().reshape({-1}));
  }
  // One collective for all of them: one flat buffer.
  torch::Tensor flat = torch::cat(grads);
  collectives_->sum(flat);
  int64_t offset = 0;
  for (auto& p : replicated_parameters_) {
    p.mutable_grad().copy_(flat.narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
}

std::vector<torch::optim::Optimizer*> Trainer::optimizers() const {
  std::vector<torch::optim::Optimizer*> all{optimizer_.get()};
  if (expert_optimizer_) all.push_back(expert_optimizer_.get());
  return all;
}

bool Trainer::stop_requested(const TrainingObserver& observer) {
  // Every process stops after the same step, or the others would wait for it forever.
  torch::Tensor stop = torch::tensor({observer.stop_requested() ? 1 : 0}, torch::kInt64);
  collectives_->max(stop);
  return stop.item<int64_t>() != 0;
}

std::vector<double> Trainer::process_means(std::vector<double> values) {
  if (collectives_->single()) return values;
  torch::Tensor totals = torch::tensor(values, torch::kFloat64);
  collectives_->sum(totals);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] =
        totals[static_cast<int64_t>(i)].item<double>() / static_cast<double>(collectives_->size());
  return values;
}

double Trainer::evaluate() {
  torch::NoGradGuard no_grad;
  model_->eval();
  double total = 0;
  for (int64_t i = 0; i < experiment_.train.eval_batches; ++i) {
    Batch batch = data_.val_batch(i, experiment_.train.batch_size, shard_).to(device_);
    total += cross_entropy(model_(batch.inputs).logits, batch.targets).item<double>();
  }
  // Evaluation time is not training time: drop what the MoE layers' clocks saw.
  for (MoELayer layer : model_->moe_layers()) layer->take_statistics();
  return process_means({total / static_cast<double>(experiment_.train.eval_batches)}).front();
}

bool Trainer::evaluates(int64_t step, std::optional<double> train_loss,
                        std::optional<double> last_eval) const {
  const TrainConfig& t = experiment_.train;
  if (step % t.eval_every == 0 || step == t.max_steps) return true;
  if (t.target_loss <= 0 || t.near_target_margin <= 0) return false;
  // Near the target, every step: the crossing is then found at the step it happens, not up to
  // eval_every steps later.
  const double near = t.target_loss * (1 + t.near_target_margin);
  return (train_loss && *train_loss <= near) || (last_eval && *last_eval <= near);
}

void Trainer::add_to_outcome(StepReport& report, TrainingOutcome& outcome) const {
  outcome.steps = report.step;
  outcome.step_seconds += report.step_seconds;
  outcome.moe_seconds += report.moe_seconds;
  outcome.moe_critical_seconds += report.moe_critical_seconds;
  outcome.moe_modeled_seconds += report.moe_modeled_seconds;
  outcome.tokens += report.tokens;
  for (const LayerStepStatistics& layer : report.layers) {
    outcome.pairs_routed += layer.pairs_routed;
    outcome.pairs_dropped += layer.pairs_dropped;
    outcome.pairs_kept += layer.pairs_kept;
    outcome.forward_capacity = outcome.forward_capacity || layer.forward_capacity;
  }
  outcome.final_train_loss = report.train_loss;
  report.cumulative_step_seconds = outcome.step_seconds;
  report.cumulative_moe_seconds = outcome.moe_seconds;
  report.cumulative_moe_critical_seconds = outcome.moe_critical_seconds;
  report.cumulative_moe_modeled_seconds = outcome.moe_modeled_seconds;
  if (!report.eval_loss) return;
  outcome.final_eval_loss = report.eval_loss;
  const double target = experiment_.train.target_loss;
  if (target > 0 && *report.eval_loss <= target && !outcome.target) {
    outcome.target = TargetReached{report.step, outcome.step_seconds, outcome.moe_seconds,
                                   outcome.moe_critical_seconds, outcome.moe_modeled_seconds};
  }
}

// A NaN or infinite loss would otherwise train on to max_steps and finish as if it meant
// something. The step is recorded first, so the database shows where it happened; every process
// reads the same process means and gradient norm, so all of them stop here.
void Trainer::require_finite(const StepReport& report) const {
  std::string bad;
  auto check = [&](const char* name, double value) {
    if (!std::isfinite(value))
      bad += fmt::format("{}{} is {}", bad.empty() ? "" : ", ", name, value);
  };
  check("the training loss", report.train_loss);
  check("the auxiliary loss", report.aux_loss);
  check("the gradient norm", report.grad_norm);
  if (report.eval_loss) check("the evaluation loss", *report.eval_loss);
  if (bad.empty()) return;
  throw std::runtime_error(
      fmt::format("step {}: {}: training diverged; lower train.lr, raise train.warmup_steps or set "
                  "train.grad_clip, or check the policies' weights",
                  report.step, bad));
}

// Step s's figures are read after step s + 1 is queued (Note [Device timing]): what decides
// whether to evaluate after a step is the last read training loss, the step before's. At a
// checkpoint step and at a stop the step is read at once, on every process alike (their
// collectives must come in the same order), and the checkpoint follows its report.
TrainingOutcome Trainer::run(TrainingObserver& observer) {
  const TrainConfig& t = experiment_.train;
  TrainingOutcome outcome = resumed_;
  std::optional<QueuedStep> unread;
  std::optional<double> last_eval = resumed_last_eval_;
  auto report = [&](QueuedStep queued) {
    StepReport read = read_step(std::move(queued));
    add_to_outcome(read, outcome);
    observer.on_step(read);
    require_finite(read);
  };
  for (int64_t step = first_step_; step <= t.max_steps; ++step) {
    std::optional<QueuedStep> trained;
    try {
      trained.emplace(train_step(step));
    } catch (...) {
      // The step before is recorded first, as it was trained (if its own figures are what went
      // wrong, its error is the one thrown). Not on several processes: reading it takes
      // collectives that the others, still in this step's, would not match.
      if (unread && collectives_->single()) {
        QueuedStep before = std::move(*unread);
        unread.reset();
        report(std::move(before));
      }
      throw;
    }
    QueuedStep queued = std::move(*trained);
    if (unread) report(std::move(*unread));
    unread.reset();
    const std::optional<double> last_train =
        outcome.steps > 0 ? std::optional<double>(outcome.final_train_loss) : std::nullopt;
    if (evaluates(step, last_train, last_eval)) {
      last_eval = evaluate();
      queued.report.eval_loss = last_eval;
    }
    const bool reached =
        t.target_loss > 0 && queued.report.eval_loss && *queued.report.eval_loss <= t.target_loss;
    const bool stopped = !reached && stop_requested(observer);
    const bool last = reached || step == t.max_steps;
    const bool checkpoint =
        (t.checkpoint_every > 0 && !reached && (stopped || step % t.checkpoint_every == 0)) ||
        (t.keep_final_checkpoint && last);
    if (reached || stopped || checkpoint) {
      report(std::move(queued));
      if (checkpoint) {
        observer.before_checkpoint(step);
        save_checkpoint(step, outcome, last_eval);
      }
      if (reached || stopped) {
        outcome.reason = reached ? StopReason::TargetReached : StopReason::Stopped;
        return outcome;
      }
      continue;
    }
    unread = std::move(queued);
  }
  if (unread) report(std::move(*unread));
  outcome.reason = StopReason::MaxSteps;
  return outcome;
}

}  // namespace lrmoe
