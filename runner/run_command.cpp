#include "run_command.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "core/config/byte_size.hpp"
#include "core/config/experiment_loader.hpp"
#include "core/config/parameter_count.hpp"
#include "core/data/token_source.hpp"
#include "core/data/tokenizer_file.hpp"
#include "core/device/compute_device.hpp"
#include "core/distributed/collectives.hpp"
#include "core/distributed/launch_environment.hpp"
#include "core/hf/hf_import.hpp"
#include "core/pipeline/rank_budget.hpp"
#include "core/plugins/policy_set.hpp"
#include "core/system/blas_probe.hpp"
#include "core/system/host_info.hpp"
#include "core/system/threads.hpp"
#include "core/train/checkpoint.hpp"
#include "core/train/process_footprint.hpp"
#include "core/train/trainer.hpp"
#include "default_experiment.hpp"
#include "interrupt.hpp"
#include "plugin_failure_report.hpp"
#include "progress_display.hpp"
#include "run_info.hpp"
#include "run_recorder.hpp"
#include "store/results_store.hpp"

namespace lrmoe {
namespace {

std::string billions(int64_t count) {
  if (count >= 1'000'000'000) return fmt::format("{:.2f}B", static_cast<double>(count) / 1e9);
  return fmt::format("{:.2f}M", static_cast<double>(count) / 1e6);
}

// Logs and records what each process holds of the model (table process_state): with sharded
// expert state, its home experts only.
void record_process_states(ResultsStore& store, int64_t run,
                           const std::vector<ProcessState>& states) {
  std::vector<ProcessStateRecord> rows;
  for (std::size_t p = 0; p < states.size(); ++p) {
    const ProcessState& s = states[p];
    spdlog::info(
        "process {} holds {} dense and {} expert parameters: {} and {} with their gradients, {} "
        "of optimizer state",
        p, billions(s.dense_parameters), billions(s.expert_parameters),
        readable_byte_size(static_cast<double>(s.dense_bytes())),
        readable_byte_size(static_cast<double>(s.expert_bytes())),
        readable_byte_size(static_cast<double>(s.optimizer_bytes())));
    rows.push_back({static_cast<int64_t>(p), s.dense_parameters, s.expert_parameters,
                    s.dense_bytes(), s.expert_bytes(), s.optimizer_bytes()});
  }
  store.add_process_states(run, rows);
}

BlasReport log_blas(const ThreadSetting& threads) {
  BlasReport blas = probe_blas();
  spdlog::info("BLAS: {} ({:.0f} GFLOP/s fp32 matmul{}), {} LibTorch intra-op threads",
               blas.library, blas.matmul_gflops, threads.blas_single ? ", one thread per GEMM" : "",
               threads.intra_op);
  if (blas.looks_like_reference) {
    spdlog::warn(
        "!!! LibTorch is running on the REFERENCE BLAS ({:.1f} GFLOP/s): training will be ~30x "
        "slower.",
        blas.matmul_gflops);
    spdlog::warn(
        "!!! Install an optimized BLAS: apt-get install libopenblas0-pthread (scripts/setup.sh "
        "does).");
  }
  return blas;
}

void print_summary(const Experiment& e, const TrainingOutcome& o, const std::string& db,
                   int64_t run, int64_t processes) {
  const char* reason = o.reason == StopReason::TargetReached ? "target reached"
                       : o.reason == StopReason::Stopped     ? "stopped by the user"
                                                             : "max_steps reached";
  fmt::print("\n== run {} '{}' ({}) ==\n", run, e.experiment.name, reason);
  fmt::print("steps               {}\n", o.steps);
  fmt::print("tokens              {}\n", o.tokens);
  fmt::print("final train loss    {:.4f}\n", o.final_train_loss);
  if (o.final_eval_loss) fmt::print("final eval loss     {:.4f}\n", *o.final_eval_loss);
  if (e.train.target_loss > 0) {
    fmt::print("target eval loss    {:.4f}: {}\n", e.train.target_loss,
               o.target ? "reached" : "NOT reached");
  }
  if (o.target) {
    fmt::print(
        "time to target      step {}, {:.2f} s of step time; MoE layers: {:.2f} s critical path, "
        "{:.2f} s "
        "wall, {:.4f} s modeled\n",
        o.target->step, o.target->step_seconds, o.target->moe_critical_seconds,
        o.target->moe_seconds, o.target->moe_modeled_seconds);
  }
  fmt::print(
      "training time       {:.2f} s of step time ({:.0f} tokens/s), {:.2f} s in MoE layers "
      "({:.0f}%)\n",
      o.step_seconds, o.step_seconds > 0 ? static_cast<double>(o.tokens) / o.step_seconds : 0.0,
      o.moe_seconds, o.step_seconds > 0 ? 100.0 * o.moe_seconds / o.step_seconds : 0.0);
  fmt::print("MoE critical path   {:.2f} s (slowest logical rank per layer and phase)\n",
             o.moe_critical_seconds);
  fmt::print("modeled MoE time    {:.4f} s on {} ranks under hardware profile {}\n",
             o.moe_modeled_seconds, e.cluster.ranks, e.cluster.profile);
  if (processes > 1)
    fmt::print("processes           {} (c10d {})\n", processes,
               backend_name(resolve_backend(e.cluster.backend,
                                            resolve_device(e.train.device, /*local_rank=*/0))));
  // A capacity or a selection that never left a pair out changed nothing: a comparison of it on
  // this run measures nothing (a selection that keeps all by design, keep_all, is not one).
  if (o.forward_capacity && o.pairs_routed > 0 && o.pairs_dropped == 0) {
    fmt::print(
        "warning             the placement's forward capacity never bound: no routed pair was "
        "dropped in forward, so the capacity changed nothing; a lower capacity factor, or a "
        "cluster.memory_per_rank that binds, lets it\n");
  }
  const int64_t computed = o.pairs_routed - o.pairs_dropped;
  if (computed > 0 && o.pairs_kept == computed && e.policies.selection.name != "keep_all") {
    fmt::print(
        "warning             the selection kept every computed pair: the metric and the selection "
        "changed no pair's backward work; a cluster.memory_per_rank that binds, or a "
        "keep_fraction below 1, lets them\n");
  }
  fmt::print("database            {} (run id {})\n", db, run);
  fmt::print("inspect with        lrmoe show {} --db {}\n", run, db);
  if (o.reason != StopReason::Stopped && e.train.keep_final_checkpoint)
    fmt::print("export with         lrmoe export-hf {} FOLDER --db {}\n", run, db);
  // A stopped run says whether it can go on, and how.
  if (o.reason == StopReason::Stopped) {
    const std::optional<std::filesystem::path> checkpoint =
        e.train.writes_checkpoints() ? latest_checkpoint(checkpoint_folder(db, run)) : std::nullopt;
    if (checkpoint) {
      fmt::print("resume with         lrmoe resume {} --db {} (from {})\n", run, db,
                 checkpoint->string());
    } else {
      fmt::print(
          "resume              not possible: the run wrote no checkpoint{} (train.checkpoint_every "
          "= N writes one every N steps and at a stop)\n",
          e.train.checkpoint_every > 0 ? " before it stopped" : "");
    }
  }
}

// What a resumed run's checkpoint must match: this experiment and build, or nothing of the two
// when told that the run is resumed by another build (its experiment is the run's own recorded
// one, which another build may hash differently).
CheckpointIdentity resume_identity(const Experiment& experiment, const ResumePoint& resume) {
  return resume.other_build ? CheckpointIdentity{} : checkpoint_identity(experiment);
}

// Process 0's run id on every process (the others pass 0), so that a process whose plugin
// crashes or hangs records that in the run (Note [Plugin failures]). Every process calls it once,
// after its trainer is made and before its checkpoints are enabled.
int64_t shared_run_id(Collectives& collectives, int64_t run) {
  if (collectives.single()) return run;
  torch::Tensor id = torch::tensor({run}, torch::kInt64);
  collectives.max(id);
  return id.item<int64_t>();
}

// Steps the run beside process 0, which alone records it. Ctrl-C here asks every process to
// stop after the step, as it does in process 0.
class FollowerObserver : public TrainingObserver {
 public:
  void on_step(const StepReport&) override {}
  bool stop_requested() const override { return interrupt_requested(); }
};

// The experiment a trainer is built from: a resumed run's without model.init_from, since its
// checkpoint overwrites whatever the folder would give. Its identity stays the experiment's own.
Experiment weights_from(Experiment experiment, bool resuming) {
  if (resuming) experiment.model.init_from.clear();
  return experiment;
}

int follow_run(const Experiment& experiment, const TokenSource& data,
               std::shared_ptr<const PolicySet> policies, std::shared_ptr<Collectives> collectives,
               HardwareProfile profile, const std::optional<ResumePoint>& resume) {
  install_interrupt_handler();
  FollowerObserver observer;
  Trainer trainer(weights_from(experiment, resume.has_value()), data, std::move(policies),
                  collectives, std::move(profile));
  if (resume) trainer.resume_from(resume->checkpoint, resume_identity(experiment, *resume));
  record_plugin_failures_in(experiment.store.path, shared_run_id(*collectives, 0));
  // Process 0 names the folder; with sharded experts this process writes its part there.
  if (experiment.train.writes_checkpoints()) trainer.enable_checkpoints(std::nullopt);
  return trainer.run(observer).reason == StopReason::Stopped ? 130 : 0;
}

}  // namespace

std::vector<std::string> experiment_arguments(const ExperimentSource& source) {
  std::vector<std::string> arguments;
  if (source.file) arguments.push_back(*source.file);
  for (const std::string& assignment : source.overrides)
    arguments.insert(arguments.end(), {"--set", assignment});
  if (source.sweep_cell) {
    arguments.insert(
        arguments.end(),
        {"--sweep-cell", fmt::format("{}:{}", source.sweep_cell->sweep, source.sweep_cell->cell)});
  }
  if (source.resume) {
    arguments.insert(arguments.end(), {"--resume-run", std::to_string(source.resume->run),
                                       "--resume-checkpoint", source.resume->checkpoint});
    if (source.resume->other_build) arguments.push_back("--resume-other-build");
  }
  return arguments;
}

SweepCellTag parse_sweep_cell(const std::string& text) {
  SweepCellTag tag;
  char colon = 0;
  std::istringstream in(text);
  if (!(in >> tag.sweep >> colon >> tag.cell) || colon != ':' || !in.eof() || tag.sweep < 0 ||
      tag.cell < 0) {
    throw std::invalid_argument("--sweep-cell " + text +
                                ": expected SWEEP:CELL, two ids; it is given by lrmoe sweep");
  }
  return tag;
}

Experiment load_experiment_source(const ExperimentSource& source) {
  Experiment e = source.file
                     ? load_experiment(*source.file, source.overrides)
                     : load_experiment_text(default_experiment_toml(),
                                            "<built-in default experiment>", source.overrides);
  if (source.database) e.store.path = *source.database;
  return e;
}

std::string experiment_place(const ExperimentSource& source) {
  return source.file.value_or("<built-in default experiment>");
}

std::string located(const std::string& place, const std::string& message) {
  return message.rfind(place, 0) == 0 ? message : place + ": " + message;
}

std::shared_ptr<const PolicySet> load_located_policy_set(const PoliciesConfig& policies,
                                                         const std::string& place) {
  try {
    return std::make_shared<const PolicySet>(load_policy_set(policies));
  } catch (const PluginError& error) {
    throw PluginError(located(place, error.what()));
  }
}

int validate_command(const ExperimentSource& source) {
  const Experiment experiment = load_experiment_source(source);
  const auto policies = load_located_policy_set(experiment.policies, experiment_place(source));
  fmt::print("{}\n# the plugins, with every parameter:\n", to_toml(experiment));
  for (const PluginRecord& plugin : policies->records) {
    fmt::print("# {} {} {} ({})\n", plugin.kind, plugin.name, plugin.version, plugin.path);
    std::istringstream lines(plugin.parameters);
    for (std::string line; std::getline(lines, line);) fmt::print("#   {}\n", line);
  }
  return 0;
}

int run_command(const ExperimentSource& source) {
  Experiment experiment = load_experiment_source(source);
  // As the sweep identified its cell: the experiment as loaded, before the data completes it.
  const std::string loaded_identity = experiment_identity(experiment);
  // Errors found below name the experiment they come from.
  const std::string where = experiment_place(source);
  // From the first plugin call on (loading them), a plugin that crashes or hangs is reported.
  watch_plugin_failures(where, experiment.policies.call_timeout);
  // Everything a user can get wrong is checked before the database is touched.
  auto data =
      make_token_source(experiment.data, experiment.experiment.seed, experiment.train.seq_len);
  try {
    experiment.model = resolve_model_vocabulary(experiment.model, data->vocab_size());
  } catch (const std::invalid_argument& error) {
    throw std::runtime_error(fmt::format("{}: {}", where, error.what()));
  }
  // So is a tokenizer that is not the one the tokens were made with.
  std::optional<TokenizerFile> tokenizer;
  if (!experiment.data.tokenizer.empty()) {
    try {
      tokenizer = check_tokenizer(experiment.data, data->provenance(), experiment.model.vocab_size);
    } catch (const DataError& error) {
      throw DataError(located(where, error.what()));
    }
  }
  // So is a model.init_from folder without this model's weights. A resumed run's weights come
  // from its checkpoint: its folder is neither checked nor read again (it may be gone).
  if (!experiment.model.init_from.empty() && !source.resume) {
    try {
      check_hf_weights(experiment.model, experiment.model.init_from);
    } catch (const std::exception& error) {
      throw std::runtime_error(located(where, "model.init_from: " + std::string(error.what())));
    }
  }
  const LaunchEnvironment launch = read_launch_environment(experiment.cluster, std::getenv);
  check_processes_fit(experiment, launch);
  if (launch.rank != 0) spdlog::set_level(spdlog::level::warn);  // one process tells the story
  experiment.train.threads = threads_per_process(experiment.train.threads, launch);
  // A plugin that cannot be found or created, and a memory_per_rank that cannot hold the dense
  // state, are configuration errors: refused before the database sees a run.
  const std::shared_ptr<const PolicySet> policies =
      load_located_policy_set(experiment.policies, where);
  RankBudget budget;
  try {
    budget =
        rank_budget(experiment.model, experiment.train, experiment.cluster,
                    pair_costs(experiment.model, experiment), experiment.policies.optimizer_state);
  } catch (const PlanError& error) {
    throw PlanError(located(where, error.what()));
  }
  // So is a hardware profile that cannot be read; this-machine is probed here, once.
  HardwareProfile profile;
  try {
    profile = resolve_hardware_profile(experiment.cluster.profile, experiment.cluster.ranks);
  } catch (const std::invalid_argument& error) {
    throw std::runtime_error(fmt::format("{}: cluster.profile: {}", where, error.what()));
  }
  // So are a device or grouped GEMM kernel this build or machine does not have, and a run too
  // large for its memory.
  std::string device_line;
  try {
    const torch::Device device = resolve_device(experiment.train.device, launch.local_rank);
    const GroupedGemmSelection kernel =
        choose_grouped_gemm_kernel(experiment.train.grouped_gemm, device,
                                   compute_dtype(experiment.train.precision), experiment.model);
    check_footprint_fits(process_footprint(experiment.model, experiment.train, experiment.cluster,
                                           launch.world_size),
                         device, launch.local_world_size);
    device_line =
        fmt::format("device {}, precision {}, grouped GEMM {} ({}), LibTorch {}",
                    device_description(device), precision_name(experiment.train.precision),
                    kernel_name(kernel.kernel), kernel.reason, torch_version());
  } catch (const std::invalid_argument& error) {
    throw std::runtime_error(fmt::format("{}: {}", where, error.what()));
  } catch (const PlanError& error) {  // a run this machine's memory cannot hold
    throw PlanError(located(where, error.what()));
  }
  // The rendezvous comes before the database: a run that cannot start records nothing.
  auto collectives = Collectives::connect(launch, experiment.cluster, experiment.train);
  if (launch.rank != 0)
    return follow_run(experiment, *data, policies, collectives, profile, source.resume);
  // A resumed run reads its checkpoint before the database is touched: a checkpoint that is not
  // the run's is refused with every row kept.
  std::unique_ptr<Trainer> resumed;
  int64_t resumed_step = 0;
  if (source.resume) {
    resumed = std::make_unique<Trainer>(weights_from(experiment, /*resuming=*/true), *data,
                                        policies, collectives, profile);
    resumed_step = resumed->resume_from(source.resume->checkpoint,
                                        resume_identity(experiment, *source.resume));
  }
  ThreadSetting threads;
  try {
    threads = configure_threads(experiment.train.threads);
  } catch (const std::invalid_argument& error) {
    throw std::runtime_error(fmt::format("{}: {}", where, error.what()));
  }
  auto store = ResultsStore::open(experiment.store.path);

  spdlog::info("experiment '{}' (seed {}), model {}", experiment.experiment.name,
               experiment.experiment.seed, experiment.model.preset);
  spdlog::info("data: {}", data->describe());
  spdlog::info("{}", device_line);
  const BlasReport blas = log_blas(threads);
  const ParameterCount params = count_parameters(experiment.model);
  spdlog::info("parameters: {} total, {} active per token", billions(params.total),
               billions(params.active));
  spdlog::info("policies: {} on {} logical ranks", policy_names(experiment.policies),
               experiment.cluster.ranks);
  spdlog::info(
      "memory per rank: {:.1f} MiB ({}; fixed ownership needs {:.1f} MiB at balanced load); cost "
      "model: {} "
      "({})",
      static_cast<double>(budget.memory_per_rank) / (1 << 20), experiment.cluster.memory_per_rank,
      static_cast<double>(budget.fixed_need_bytes) / (1 << 20), profile.name, profile.source);
  if (launch.world_size > 1) {
    spdlog::info(
        "processes: {} ({}), {} logical ranks each, {} rows of every batch each, rendezvous {}:{}",
        launch.world_size, launch.launcher, experiment.cluster.ranks / launch.world_size,
        experiment.train.batch_size / launch.world_size, launch.master_addr, launch.master_port);
  }

  RunInfo info = run_info(experiment, profile, budget.memory_per_rank,
                          fmt::format("{} ({:.0f} GFLOP/s)", blas.library, blas.matmul_gflops),
                          launch.world_size);
  info.sweep_cell = source.sweep_cell;
  if (source.sweep_cell) info.experiment_identity = loaded_identity;
  int64_t run = 0;
  if (source.resume) {
    run = source.resume->run;
    store->resume_run(run, resumed_step);
    store->add_event(
        run, "info",
        fmt::format("resumed after step {} from {}", resumed_step, source.resume->checkpoint));
  } else {
    run = store->begin_run(info);
    store->add_plugins(run, plugin_rows(*policies));
    store->add_data(run, data_row(data->provenance(), tokenizer));
    store->add_event(run, "info", "data: " + data->describe());
  }
  store->add_event(run, "info", device_line);
  record_plugin_failures_in(store->path(), run);

  install_interrupt_handler();
  ProgressDisplay progress(experiment.train.max_steps, experiment.train.log_every);
  RunRecorder recorder(*store, run, &progress);
  TrainingOutcome outcome;
  try {
    std::unique_ptr<Trainer> trainer = std::move(resumed);
    if (!trainer)
      trainer = std::make_unique<Trainer>(experiment, *data, policies, collectives, profile);
    shared_run_id(*collectives, run);
    record_process_states(*store, run, trainer->process_states());
    if (experiment.train.writes_checkpoints())
      trainer->enable_checkpoints(CheckpointSettings{checkpoint_folder(store->path(), run),
                                                     checkpoint_identity(experiment)});
    outcome = trainer->run(recorder);
  } catch (const std::exception& error) {
    progress.finish();
    store->add_event(run, "error", error.what());
    store->finish_run(run, "failed", std::nullopt);
    throw;
  }
  progress.finish();

  std::optional<TimeToTarget> time_to_target;
  if (outcome.target) {
    const TargetReached& t = *outcome.target;
    time_to_target = TimeToTarget{t.step, t.step_seconds, t.moe_seconds, t.moe_modeled_seconds,
                                  t.moe_critical_seconds};
  }
  const bool stopped = outcome.reason == StopReason::Stopped;
  store->add_event(run, stopped ? "warning" : "info", stopped ? "stopped by the user" : "finished");
  store->finish_run(run, stopped ? "stopped" : "finished", time_to_target);
  // A finished run is never resumed: its checkpoints (a model and its optimizer state each) would
  // only fill the disk, a sweep's many runs most of all. Its last one stays when asked for, to be
  // exported.
  if (!stopped && experiment.train.keep_final_checkpoint) {
    prune_checkpoints(checkpoint_folder(store->path(), run), 1);
  } else if (!stopped && experiment.train.checkpoint_every > 0) {
    std::error_code ignored;
    std::filesystem::remove_all(checkpoint_folder(store->path(), run), ignored);
  }
  print_summary(experiment, outcome, store->path(), run, launch.world_size);
  return stopped ? 130 : 0;
}

}  // namespace lrmoe
