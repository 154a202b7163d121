#pragma once
// The training loop: AdamW with warm-up and cosine decay, gradient clipping, micro-batches with
// gradient accumulation, periodic evaluation; stops at the target evaluation loss or max_steps.
// Every source of randomness is seeded from the experiment: the same experiment gives the same
// losses bit for bit on the same machine.
//
// With P processes (core/distributed/collectives.hpp), each process reads its 1/P of every batch
// and hosts R/P of the logical ranks. Each process holds its home experts with their optimizer
// state and fetches the others it computes for each pass, their gradients going home
// (docs/ARCHITECTURE.md, "Expert-sharded state"); dense gradients are summed over the processes
// after the last micro-batch (data parallel), so the losses are those of one process reading the
// whole batch, within float rounding (Note [Exact multi-process plan] in docs/notes.md). With
// cluster.expert_state = "replicated" every process holds and steps every expert, their
// gradients summed with the dense ones.

#include <torch/torch.h>

#include <memory>
#include <optional>

#include "core/config/experiment.hpp"
#include "core/data/token_source.hpp"
#include "core/device/host_readback.hpp"
#include "core/device/span_timer.hpp"
#include "core/distributed/collectives.hpp"
#include "core/model/grouped_gemm_choice.hpp"
#include "core/model/transformer.hpp"
#include "core/pipeline/rank_budget.hpp"
#include "core/plugins/policy_set.hpp"
#include "core/train/checkpoint.hpp"
#include "core/train/training_observer.hpp"

namespace lrmoe {

enum class StopReason { TargetReached, MaxSteps, Stopped };

struct TargetReached {
  int64_t step = 0;
  double step_seconds = 0;          // cumulative step time until then
  double moe_seconds = 0;           // cumulative MoE-layer wall time until then
  double moe_critical_seconds = 0;  // cumulative MoE-layer critical path until then
  double moe_modeled_seconds = 0;   // cumulative modeled MoE-layer time until then
};

struct TrainingOutcome {
  StopReason reason = StopReason::MaxSteps;
  int64_t steps = 0;
  double final_train_loss = 0;
  std::optional<double> final_eval_loss;
  std::optional<TargetReached> target;
  double step_seconds = 0;
  double moe_seconds = 0;
  double moe_critical_seconds = 0;
  double moe_modeled_seconds = 0;
  int64_t tokens = 0;
  // Over the MoE layers and the steps this process trained (a resumed run's since its resume):
  // routed pairs, those dropped in forward and those kept in backward. Not checkpointed.
  int64_t pairs_routed = 0, pairs_dropped = 0, pairs_kept = 0;
  bool forward_capacity = false;  // some pass's placement set a forward capacity
};

// Where and as what this process writes its run's checkpoints (Note [Checkpoints]).
struct CheckpointSettings {
  std::filesystem::path folder;
  CheckpointIdentity identity;
};

// What one process holds of the model, counted from its parameters (docs/ARCHITECTURE.md,
// "Expert-sharded state"): fp32 parameters with their gradients, 8 bytes each, and AdamW's two
// moments, 8 bytes more once the first step has run.
struct ProcessState {
  int64_t dense_parameters = 0;   // every parameter but the routed experts' (alike everywhere)
  int64_t expert_parameters = 0;  // the routed experts' parameters it holds

  int64_t dense_bytes() const { return 8 * dense_parameters; }
  int64_t expert_bytes() const { return 8 * expert_parameters; }
  int64_t optimizer_bytes() const { return 8 * (dense_parameters + expert_parameters); }
};

// The model's configuration with the vocabulary taken from the data when it is 0. Throws
// std::invalid_argument when the data's vocabulary does not fit the model's.
ModelConfig resolve_model_vocabulary(const ModelConfig& model, int64_t data_vocab_size);

class Trainer {
 public:
  // Seeds torch, builds the model on train.device in train.precision and the optimizer, and
  // installs the grouped GEMM kernel (train.grouped_gemm). Throws std::invalid_argument when
  // the device or kernel asked for cannot be had. With `policies`, every MoE layer trains
  // through the LRMoE pipeline on cluster.ranks logical ranks; without, it is exact on one rank.
  // `collectives`: the processes of the run; none: this process alone. `profile`: the cost
  // model's hardware profile, resolved by the caller (this-machine is probed once per run);
  // none: resolved here from cluster.profile.
  Trainer(const Experiment& experiment, const TokenSource& data,
          std::shared_ptr<const PolicySet> policies = nullptr,
          std::shared_ptr<Collectives> collectives = nullptr,
          std::optional<HardwareProfile> profile = std::nullopt);

  // Trains from step 1, or from the step after the checkpoint resume_from read, to the target,
  // max_steps or a stop. Every train.checkpoint_every steps, and at a stop, every process reads
  // the step at once (not one step late); a process given enable_checkpoints then writes it.
  TrainingOutcome run(TrainingObserver& observer);
  // Makes the run write checkpoints into `settings`' folder, keeping the newest
  // train.checkpoint_keep (Note [Checkpoints]). Every process calls it, process 0 with the
  // settings and the others with none: with replicated expert state process 0 alone writes
  // (every process holds the same state); with sharded state on several processes the call is
  // collective, and each process writes its own experts into process 0's folder.
  void enable_checkpoints(std::optional<CheckpointSettings> settings);
  // Restores the model, optimizer, random generator, pipelines' histories, policies' states and
  // the run's totals from `file` (and, with sharded expert state, this process's experts from
  // its part beside it); run() then continues after its step, which is returned. Throws
  // CheckpointError when a file cannot be read, is not of `expected`, or was written by another
  // number of processes with sharded state.
  int64_t resume_from(const std::filesystem::path& file, const CheckpointIdentity& expected);
  // Mean cross-entropy over train.eval_batches validation batches.
  double evaluate();
  // One forward and backward of `batch` as a training step makes them (through the pipelines,
  // gradients summed over the processes) but without the optimizer step: the logits and the
  // cross-entropy (no auxiliary loss), the gradients left on parameters(). What a check against
  // a reference implementation compares (`lrmoe hf-compute`).
  struct ForwardBackward {
    torch::Tensor logits;  // [batch, seq, vocab], detached
    torch::Tensor loss;    // scalar float32, detached
  };
  ForwardBackward forward_backward(const Batch& batch);
  // The model's parameters and buffers by name, as named_parameters() names them.
  std::vector<std::pair<std::string, torch::Tensor>> named_tensors() const;

  const ModelConfig& model_config() const { return model_config_; }
  // How each rank's memory divides; zero without policies.
  const RankBudget& rank_budget() const { return budget_; }
  // The model's parameters: fp32 master weights whatever train.precision.
  std::vector<torch::Tensor> parameters() const { return model_->parameters(); }
  // Every process's holding, in process order (gathered at construction).
  const std::vector<ProcessState>& process_states() const { return process_states_; }
  // Where the model, batches and optimizer state live (train.device resolved).
  const torch::Device& device() const { return device_; }
  // The grouped GEMM kernel chosen at construction, and why (installed for the whole process).
  const GroupedGemmSelection& grouped_gemm() const { return grouped_gemm_; }
  // The profile the cost model uses (loaded, or probed once for "this-machine"); default
  // without policies.
  const HardwareProfile& hardware_profile() const { return profile_; }
  // How many steps' figures were not ready when read one step late, so that reading them
  // waited for the device (Note [Device timing]); zero on the CPU.
  int64_t timing_waits() const { return timing_waits_; }

 private:
  // A step queued on the device whose figures the host has not read yet: the losses, gradient
  // norm and expert counts on their way to the host, and the timed spans.
  struct QueuedStep {
    StepReport report;  // what the host knows at once: step, lr, tokens (and eval loss, later)
    HostReadback figures;
    std::vector<LayerStepStatistics> layers;  // per MoE layer, its spans unread
    TimedSpans step_time;
    std::optional<MeasuredPeaks> measured;  // the allocator's peaks (host counters)
  };

  // Queues one optimizer step on the device.
  QueuedStep train_step(int64_t step);
  // The step's report, read from the host copies and spans, gathered over the processes.
  StepReport read_step(QueuedStep queued);
  // Adds a read step to the run's totals and sets its cumulative figures.
  void add_to_outcome(StepReport& report, TrainingOutcome& outcome) const;
  // Throws when a loss or the gradient norm of `report` is NaN or infinite.
  void require_finite(const StepReport& report) const;
  // An ExpertPipeline for every MoE layer, sharing the policies.
  void install_pipelines(std::shared_ptr<const PolicySet> policies,
                         std::optional<HardwareProfile> profile);
  // model.init_from: the weights of a Hugging Face folder, this process's experts only.
  void start_from_hf_weights();
  // Sorts the model's parameters into those every process holds alike and, with sharded expert
  // state, the experts each holds its own of; gathers every process's ProcessState.
  void split_parameters(bool sharded);
  // Sums every replicated parameter's gradient over the processes.
  void sum_gradients();
  // Every process's measured layer times, rank times and exchanges into `report` (the slowest
  // process's times become the layer's), and each layer's critical path.
  // `measured`: the step's peaks of this process's device allocator, if it has one.
  void gather_measurements(StepReport& report, std::optional<MeasuredPeaks> measured);
  // Whether to evaluate after `step`: every eval_every steps, and every step once the losses
  // are near the target (train.near_target_margin): `train_loss` is the last one read (the step
  // before's, none at the first step), `last_eval` the last evaluation's.
  bool evaluates(int64_t step, std::optional<double> train_loss,
                 std::optional<double> last_eval) const;
  // Writes the state after `step` (its report read) as a checkpoint, atomically: with sharded
  // expert state every process's part first, then process 0's main file.
  void save_checkpoint(int64_t step, const TrainingOutcome& outcome,
                       std::optional<double> last_eval) const;
  // What process 0 alone writes: every replicated parameter, buffer and their optimizer state,
  // the generator, histories, policies' states and totals.
  void save_main_checkpoint(int64_t step, const TrainingOutcome& outcome,
                            std::optional<double> last_eval) const;
  // This process's part of a checkpoint: its experts and their optimizer state.
  void save_checkpoint_part(int64_t step) const;
  void restore_checkpoint_part(const std::filesystem::path& main, int64_t step,
                               const CheckpointIdentity& expected);
  // Whether every process's `done` holds; collective with several processes.
  bool on_every_process(bool done) const;
  // The optimizers: the replicated parameters', then the sharded experts' (when sharded).
  std::vector<torch::optim::Optimizer*> optimizers() const;
  // The replica gradients still on their way home, added into their experts' (Note
  // [Overlapped expert fetch]): after a step's last backward, before gradients are read.
  void finish_gradient_returns();
  // Whether any process's observer asks to stop.
  bool stop_requested(const TrainingObserver& observer);
  // The means over processes of values each computed on its shard, in one collective.
  std::vector<double> process_means(std::vector<double> values);

  Experiment experiment_;
  const TokenSource& data_;
  std::shared_ptr<Collectives> collectives_;
  torch::Device device_;
  GroupedGemmSelection grouped_gemm_;
  RowShard shard_;
  ModelConfig model_config_;
  Transformer model_{nullptr};
  std::vector<torch::Tensor> replicated_parameters_;  // the same on every process
  std::vector<torch::Tensor> sharded_parameters_;     // this process's experts, when sharded
  std::vector<ProcessState> process_states_;
  // Two optimizers with one update rule: the sharded experts' state is saved in each process's
  // part of a checkpoint, the rest once (Note [Checkpoints]).
  std::unique_ptr<torch::optim::AdamW> optimizer_;          // replicated_parameters_
  std::unique_ptr<torch::optim::AdamW> expert_optimizer_;   // sharded_parameters_, when sharded
  std::vector<std::shared_ptr<ExpertPipeline>> pipelines_;  // one per MoE layer
  RankBudget budget_;
  HardwareProfile profile_;  // the cost model's (Note [Cost model])
  SpanTimer step_timer_;     // each step's forward, backward and optimizer
  int64_t timing_waits_ = 0;
  std::shared_ptr<const PolicySet> policies_;
  std::optional<CheckpointSettings> checkpoints_;
  // What resume_from restored, for run(): the step it continues after, the totals until then and
  // the last evaluation loss.
  int64_t first_step_ = 1;
  TrainingOutcome resumed_;
  std::optional<double> resumed_last_eval_;
};

}  // namespace lrmoe
