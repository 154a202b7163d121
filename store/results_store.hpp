#pragma once
// The results database (SQLite). One file holds every run of a project: runs, the policy plugins
// they used, steps, per-step expert load, per-step statistics of each MoE layer and memory of
// each rank, and events. Schema and migrations: store/schema.cpp.
//
// Writes on the training hot path (steps, expert load, layer statistics, rank memory, events)
// are buffered and committed in one
// transaction per flush; a killed process therefore loses at most the unflushed tail, and every
// committed step stays readable. Opening a database marks runs whose process is gone as
// 'interrupted'.

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace lrmoe {

// A database problem a user can cause or fix (bad path, not a database, newer schema, SQL
// error in `lrmoe query`). The message names the file.
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A run's place in a sweep (lrmoe sweep): the sweep's id and the cell's number.
struct SweepCellTag {
  int64_t sweep = 0;
  int64_t cell = 0;
};

// What a sweep's cells are runs of: a training sweep (lrmoe sweep), or a replay's variants
// (lrmoe replay --record). A name holds one kind.
enum class SweepKind { Train, Replay };

struct RunInfo {
  std::string name;   // a sweep's cell names its run "SWEEP/CELL" when it is recorded
  std::string model;  // the model by name: its preset, "hf:FOLDER" for a config.json, or "custom"
  std::string resolved_toml;
  std::string toml_sha256;
  std::string code_version;
  std::string host;
  int64_t pid = 0;
  std::string torch_version;
  std::string blas;
  uint64_t seed = 0;
  int64_t params_total = 0;
  int64_t params_active = 0;
  int64_t ranks = 1;      // logical ranks the experts are placed on
  int64_t processes = 1;  // processes hosting them
  // The policies' names, placement/metric/selection/routing: "fixed_ownership/gate/keep_all/owner".
  std::string policies;
  std::optional<double> target_loss;
  std::string hardware_profile;            // the cost model's profile, resolved (TOML)
  int64_t memory_per_rank = 0;             // cluster.memory_per_rank resolved to bytes
  std::optional<SweepCellTag> sweep_cell;  // a run of a sweep's cell
  // With sweep_cell: the identity of the experiment the run trains (runner/run_info.hpp), which
  // the sweep compares with the cell's.
  std::string experiment_identity;
  // A replay (Note [Replay]) plans without training; `load_source` says what drove its routing.
  bool replay = false;
  std::string load_source;
};

// One cell of a sweep as recorded: its settings identify it when the sweep is resumed.
struct SweepCellRecord {
  std::string settings;  // `section.key=value, ...` in axis order, full keys, TOML values
  std::string label;     // short form for people: "keep_fraction=0.5, seed=2"
  // Of the cell's resolved experiment, run-independent parts only: a cell whose experiment
  // resolves differently (its base file changed) is not the cell recorded.
  std::string experiment_sha256;
  std::vector<std::pair<std::string, std::string>> values;  // (key, value as written)
  std::string model;    // the cell's model label (sweep_spec.hpp); empty without a model axis
  std::string variant;  // its variant label; empty without a variant axis
};

struct SweepRecord {
  std::string name;
  std::string file;  // the sweep file
  std::vector<SweepCellRecord> cells;
  SweepKind kind = SweepKind::Train;
};

struct SweepCellNumbers {
  int64_t sweep = 0;
  std::vector<int64_t> cells;  // the number of each cell given, in the order given
};

// A cell and its last run, if any.
struct SweepCellState {
  int64_t cell = 0;
  std::string settings;
  std::string label;
  std::optional<int64_t> run;
  std::string status;  // of the last run; empty without one
  int64_t runs = 0;    // how many runs the cell had
  // Whether the last run trained the cell's recorded experiment (runs recorded before schema
  // 18 are taken to have).
  bool run_matches = true;
};

// A policy plugin a run used (recorded once, at begin).
struct PluginRecordRow {
  std::string kind;  // placement | metric | selection | routing: one plugin of each per run
  std::string name;
  std::string version;
  std::string parameters;  // every parameter with its value, as TOML text
  std::string path;        // the shared library
  std::string sha256;      // of that library
};

// What one process of a run holds of the model (table process_state): parameter counts, and
// bytes of fp32 parameters with their gradients, and of the optimizer's state.
struct ProcessStateRecord {
  int64_t process = 0;
  int64_t dense_parameters = 0, expert_parameters = 0;
  int64_t dense_bytes = 0, expert_bytes = 0, optimizer_bytes = 0;
};

// What a run trained on (table run_data; Note [Data provenance] in docs/notes.md): the file's
// fields are NULL for synthetic data, the corpus's without a tokens file's manifest.
struct RunDataRow {
  std::string kind;  // synthetic | text | tokens
  std::optional<std::string> path;
  std::optional<int64_t> bytes;
  std::optional<std::string> sha256;
  std::optional<int64_t> tokens;
  std::optional<std::string> corpus;  // the corpus's name
  std::optional<int64_t> corpus_bytes;
  std::optional<std::string> corpus_sha256;
  std::optional<std::string> corpus_sources;
  std::optional<std::string> tokenizer;  // library, version and model
  std::optional<int64_t> tokenizer_vocab;
  std::optional<std::string> tokenizer_sha256;
};

struct StepRecord {
  int64_t step = 0;
  double train_loss = 0;
  std::optional<double> eval_loss;
  double lr = 0;
  double grad_norm = 0;
  int64_t tokens = 0;               // tokens in this step
  double step_seconds = 0;          // wall time of the step
  double moe_seconds = 0;           // wall time inside MoE layers (forward + backward)
  double moe_critical_seconds = 0;  // critical path of the MoE layers (Note [Critical path])
  // Modeled MoE-layer time of the step (cost model). Reads back as NaN for steps written
  // before schema 3, which did not record it.
  double moe_modeled_seconds = 0;
};

// One MoE layer in one step (layer = index among the MoE layers).
struct LayerStepRecord {
  int64_t step = 0, layer = 0;
  int64_t pairs_routed = 0, pairs_dropped = 0, pairs_kept = 0, replicas = 0;
  // Pairs per rank: the busiest rank's and the mean over ranks.
  int64_t forward_load_max = 0;
  double forward_load_mean = 0;
  int64_t backward_load_max = 0;
  double backward_load_mean = 0;
  // Bytes over all ranks: the four all-to-alls and the replica traffic, and of all of them those
  // between ranks on different nodes of the hardware profile.
  int64_t bytes_forward_dispatch = 0, bytes_forward_combine = 0, bytes_backward_dispatch = 0,
          bytes_backward_return = 0, bytes_replica_sync = 0, bytes_cross_node = 0;
  // Measured wall time of the layer, its critical path and the sum over ranks (Note [Critical
  // path]), and its cost-model time with its parts (Note [Cost model]).
  double forward_seconds = 0, backward_seconds = 0, modeled_seconds = 0;
  double critical_path_seconds = 0, rank_sum_seconds = 0;
  double modeled_compute_seconds = 0, modeled_all_to_all_seconds = 0, modeled_gather_seconds = 0,
         modeled_replica_seconds = 0;
  // Of the modeled seconds of transfer, those hidden behind compute: the chunks' all-to-all, a
  // fetch placed ahead, a deferred gradient return (ModeledTime::overlapped; modeled_seconds is
  // the parts less these).
  double modeled_overlapped_seconds = 0;
  // Of those, the parameter transfers' (ModeledTime::hidden_transfers); the rest is all-to-all.
  double modeled_hidden_transfer_seconds = 0;
  // The parts of the measured time spent deciding and rearranging rather than computing.
  double placement_seconds = 0, metric_seconds = 0, selection_seconds = 0, routing_seconds = 0,
         compaction_seconds = 0;
  // Measured: pair-row bytes sent between processes (all processes) and the slowest process's
  // all-to-all-v time; zero with one process.
  int64_t measured_exchange_bytes = 0;
  double measured_exchange_seconds = 0;
  // Measured, sharded expert state: expert weights fetched and gradients returned between
  // processes, bytes (all processes; bytes_replica_sync is the cost model's for the same), and
  // the slowest process's seconds in those exchanges; zero with replicated experts.
  int64_t measured_parameter_bytes = 0;
  double measured_parameter_seconds = 0;
  // What the placement planned from (lrmoe::PlanInformation, placement_information_name):
  // "this pass", "earlier passes", "warm-up" or "no counts".
  std::string placement_information;
};

// One logical rank in one MoE layer and step: pairs computed and pair-row bytes moved.
struct RankLayerRecord {
  int64_t step = 0, layer = 0, rank = 0;
  int64_t forward_pairs = 0, backward_pairs = 0, bytes_sent = 0, bytes_received = 0;
  // the rank's time per phase on the critical path
  double forward_seconds = 0, backward_seconds = 0;
};

// One span of a recorded step's timeline (Note [Step trace]): what it was (kind: "step",
// "layer", "plan", "expert", "all-to-all", "transfer"), where (process; rank for an expert
// span; MoE layer and phase "forward" or "backward", or "step" for the whole step), and when,
// in seconds from the process's start of the step.
struct TraceSpanRecord {
  int64_t step = 0, process = 0;
  std::optional<int64_t> rank, layer;
  std::string phase;
  std::string kind;
  double start_seconds = 0, seconds = 0;
};

// One process in one MoE layer and step of a multi-process run, measured.
struct ProcessLayerRecord {
  int64_t step = 0, layer = 0, process = 0;
  int64_t bytes_sent = 0, bytes_received = 0;
  double exchange_seconds = 0;
  int64_t exchange_calls = 0;
  double forward_seconds = 0, backward_seconds = 0;
  // Sharded expert state: the experts' weights fetched and gradients returned, bytes to and
  // from other processes, host seconds from each call's start to its arrival, calls (zero with
  // replicated experts), and of those seconds the ones the process was blocked in them (less
  // where a fetch travelled while the pairs were dispatched).
  int64_t parameter_bytes_sent = 0, parameter_bytes_received = 0;
  double parameter_seconds = 0;
  int64_t parameter_calls = 0;
  double parameter_blocked_seconds = 0;
};

// One expert instance of a step's placement in one MoE layer (Note [Placement trace]): a replica,
// recorded every step, or an expert's owner, recorded when it moved.
struct PlacementRecord {
  int64_t step = 0, layer = 0, expert = 0, rank = 0, slot = 0;
  int64_t owner = 0;  // 1: the expert's owner, 0: a replica
};

// Memory of one logical rank in one step, bytes by category (peak over the step).
struct RankMemoryRecord {
  int64_t step = 0, rank = 0;
  int64_t owned = 0, replicas = 0, gradients = 0, optimizer = 0, forward_tokens = 0,
          backward_tokens = 0, dense = 0;
  // The categories above are those at the peak of the rank's memory timeline: its moment
  // ("forward" or "backward" of an MoE layer); the largest subtotal and its moment.
  std::string peak_phase;
  int64_t peak_layer = 0;
  std::optional<int64_t> peak_subtotal;  // none: the subtotal of the categories above
  std::string subtotal_phase;
  int64_t subtotal_layer = 0;
  // The CUDA caching allocator's peaks over the step, its forward passes and its backward
  // passes (Note [Device timing]); none on the CPU.
  std::optional<int64_t> measured_peak;
  std::optional<int64_t> measured_forward_peak;
  std::optional<int64_t> measured_backward_peak;
};

// Cumulative times until the evaluation loss first reached the target.
struct TimeToTarget {
  int64_t step = 0;
  double step_seconds = 0;
  double moe_seconds = 0;
  double moe_modeled_seconds = 0;   // NaN for runs finished before schema 3
  double moe_critical_seconds = 0;  // NaN for runs finished before schema 5
};

struct RunSummary {
  int64_t id = 0;
  std::string name;
  std::string model;                 // by name (RunInfo::model); empty for replays
  std::optional<std::string> sweep;  // the sweep of which the run is a cell's run
  std::optional<int64_t> cell;
  std::string status;  // running | finished | failed | stopped | interrupted
  std::string started_at;
  std::optional<std::string> ended_at;
  std::string resolved_toml;
  std::string toml_sha256;
  std::string code_version;
  std::string host;
  std::string torch_version;
  std::string blas;
  uint64_t seed = 0;
  int64_t params_total = 0;
  int64_t params_active = 0;
  int64_t ranks = 1;      // 1 for runs begun before schema 3
  int64_t processes = 1;  // 1 for runs begun before schema 4
  std::string policies;   // empty for runs begun before schema 3
  std::optional<double> target_loss;
  std::optional<TimeToTarget> time_to_target;
  int64_t steps = 0;
  std::optional<double> final_train_loss;
  std::optional<double> final_eval_loss;
  bool replay = false;      // planned without training (Note [Replay])
  std::string load_source;  // a replay's routing: synthetic skew or a run's recorded loads
};

// One run's figures for a comparison (lrmoe compare).
struct RunFigures {
  int64_t run = 0;
  std::string status;
  uint64_t seed = 0;
  std::string policies;
  std::string resolved_toml;
  int64_t steps = 0;
  std::optional<double> target_loss;
  std::optional<TimeToTarget> time_to_target;  // none: the target was not reached
  // The largest memory subtotal of any rank and step (Note [Memory model]); none without the
  // pipeline.
  std::optional<int64_t> peak_subtotal;
  // Summed over the run's steps and MoE layers.
  int64_t pairs_routed = 0;
  int64_t pairs_dropped = 0;  // in forward, by a placement's forward capacity
  int64_t pairs_kept = 0;     // with backward work
  // Modeled MoE seconds per step (cost model), the mean over the run's steady steps (those in
  // which no placement was warming up: Note [SYMI as published]); none without steps.
  std::optional<double> modeled_seconds_per_step;
  // The run's sweep cell's settings (key, value) in axis order; empty outside a sweep.
  std::vector<std::pair<std::string, std::string>> cell_values;
  std::string model;          // by name (RunInfo::model); empty for runs before schema 17
  std::string sweep_model;    // its sweep cell's model label; empty outside a sweep or without
  std::string sweep_variant;  // its sweep cell's variant label; likewise
  std::vector<PluginRecordRow> plugins;  // with every parameter's value
  // Means over the run's steps and MoE layers: replica instances, and the busiest rank's
  // forward pairs over the mean rank's; none without the pipeline.
  std::optional<double> replicas;
  std::optional<double> forward_imbalance;
};

// A training run's MoE time to target projected at a model's full dimensions (table
// run_projections, `lrmoe project`; Note [Projection at full size] in docs/notes.md): sampled
// steps of its recorded per-expert loads replayed at `model` on `ranks` ranks of
// `tokens_per_rank` tokens under `profile`, the modeled seconds per step summed over `steps`.
struct ProjectionRecord {
  int64_t run = 0;
  std::string model;  // the full-size preset
  int64_t ranks = 0;
  int64_t tokens_per_rank = 0;
  std::string profile;
  // cluster.memory_per_rank at full size: the run's when relative ("1.0x fixed"), else
  // "100x fixed" (an absolute budget was chosen for the run's size)
  std::string memory_per_rank;
  std::string sampled_steps;  // the run's steps replayed, "12,25,37,50"
  int64_t steps = 0;          // summed over: to the target, or all the run's when it missed
  bool reached = false;       // whether `steps` are the run's steps to its target
  // Per step, the mean over the sampled steps (modeled seconds, every MoE layer): expert compute,
  // all-to-all, the plans' collectives and parameter transfers (ModeledTime's parts).
  double compute_seconds = 0, all_to_all_seconds = 0, gather_seconds = 0, transfer_seconds = 0;
  double projected_seconds = 0;       // steps times the per-step total
  std::optional<std::string> failed;  // a plan that did not fit at this size: why (seconds 0)
};

// A run's recorded per-expert loads over some of its steps (table expert_load).
struct ExpertLoadHistory {
  std::vector<int64_t> steps;   // in order
  std::vector<int64_t> layers;  // block indices of the MoE layers, in order
  // [step index][MoE layer][expert]: token-expert pairs routed
  std::vector<std::vector<std::vector<int64_t>>> pairs;
};

struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<std::optional<std::string>>> rows;  // nullopt: SQL NULL
};

// Bounds on one read-only query (`lrmoe query`): a statement past them ends with a StoreError
// saying which bound it met and how to narrow it. 0: no bound.
struct QueryLimits {
  double seconds = 0;  // wall time
  int64_t bytes = 0;   // SQLite's heap while it runs, and the answer's text
  // Polled while the statement runs: true stops it (Ctrl-C).
  bool (*stop_requested)() = nullptr;
};

class ResultsStore {
 public:
  // Opens (creating if needed) and migrates to the current schema. Throws StoreError.
  static std::unique_ptr<ResultsStore> open(const std::string& path);
  // Opens an existing database without writing anything (for `runs`, `show`, `query`). A file
  // with an older schema opens too, but only `steps` and `query` read it; the summaries
  // (`list_runs`, `find_run`) ask for the upgrade that any open() does. Runs are not settled
  // as 'interrupted' here: that is a write.
  static std::unique_ptr<ResultsStore> open_read_only(const std::string& path);

  virtual ~ResultsStore() = default;
  virtual const std::string& path() const = 0;

  // Records a new run as 'running', now. An empty `host` and a zero `pid` mean this host and
  // this process: the pair that lets a later open() notice the process is gone.
  virtual int64_t begin_run(const RunInfo& info) = 0;
  // Written at once, all or none in one transaction: a run records its plugins once, before
  // its first step.
  virtual void add_plugins(int64_t run, const std::vector<PluginRecordRow>& plugins) = 0;
  virtual void add_data(int64_t run, const RunDataRow& data) = 0;
  // Every process's holding, at once; a resumed run's replace its earlier ones.
  virtual void add_process_states(int64_t run, const std::vector<ProcessStateRecord>& states) = 0;
  virtual void add_step(int64_t run, const StepRecord& step) = 0;
  // pairs_per_expert[e]: token-expert pairs routed to expert e of `layer` in `step`.
  virtual void add_expert_load(int64_t run, int64_t step, int64_t layer,
                               const std::vector<int64_t>& pairs_per_expert) = 0;
  virtual void add_layer_step(int64_t run, const LayerStepRecord& record) = 0;
  virtual void add_rank_memory(int64_t run, const RankMemoryRecord& record) = 0;
  virtual void add_rank_layer(int64_t run, const RankLayerRecord& record) = 0;
  virtual void add_process_layer(int64_t run, const ProcessLayerRecord& record) = 0;
  virtual void add_trace_span(int64_t run, const TraceSpanRecord& record) = 0;
  virtual void add_placement(int64_t run, const PlacementRecord& record) = 0;
  virtual void add_event(int64_t run, const std::string& level, const std::string& message) = 0;
  // Commits everything buffered in one transaction (also done on its own past 20k buffered
  // rows, and by the destructor). If it fails, the batch is dropped and the StoreError says
  // how many rows were lost, so that one bad row cannot make every later flush fail.
  virtual void flush() = 0;
  // Takes run `run` up again after step `step` (Note [Checkpoints]): it must be stopped,
  // interrupted or failed and have recorded every step up to `step`; its rows of later steps are
  // deleted (they are recorded again), and it becomes 'running' in this process, with no end time
  // and no time to target. Throws StoreError naming the run and its status otherwise.
  virtual void resume_run(int64_t run, int64_t step) = 0;
  // Flushes, then records the final status, end time and time-to-target.
  virtual void finish_run(int64_t run, const std::string& status,
                          const std::optional<TimeToTarget>& time_to_target) = 0;

  // Records the sweep `sweep.name`, or finds it: cells with settings already recorded keep their
  // numbers, new ones get the next. Throws StoreError when a recorded cell's experiment now
  // resolves differently.
  virtual SweepCellNumbers record_sweep(const SweepRecord& sweep) = 0;
  virtual std::vector<SweepCellState> sweep_cells(int64_t sweep) const = 0;
  // The last run of each cell of the sweep named `name`, in cell order.
  virtual std::vector<int64_t> sweep_last_runs(const std::string& name) const = 0;
  // What a comparison needs of each of `runs`, in that order.
  virtual std::vector<RunFigures> run_figures(const std::vector<int64_t>& runs) const = 0;

  // The per-expert loads of the last `last_steps` steps of `run` that recorded them. Throws
  // StoreError when it has none.
  virtual ExpertLoadHistory expert_load_history(int64_t run, int64_t last_steps) const = 0;
  // Replaces the projection of the same run, model, ranks, tokens and profile.
  virtual void add_projection(const ProjectionRecord& projection) = 0;
  // The projections of `runs`, by run, model, ranks, tokens per rank and profile.
  virtual std::vector<ProjectionRecord> projections(const std::vector<int64_t>& runs) const = 0;

  // The readers see committed rows only: flush() first to read what this store buffered.
  virtual std::vector<RunSummary> list_runs() const = 0;
  virtual std::optional<RunSummary> find_run(int64_t id) const = 0;
  virtual std::vector<StepRecord> steps(int64_t run) const = 0;
  // Runs one read-only SQL statement and returns its rows as text. Several statements, or one
  // that could write, are refused with a StoreError; so is one past `limits`.
  virtual QueryResult query(const std::string& sql, const QueryLimits& limits = {}) const = 0;
};

// The schema version this build writes (PRAGMA user_version).
int current_schema_version();

}  // namespace lrmoe
