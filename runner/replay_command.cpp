#include "runner/replay_command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "core/config/experiment_loader.hpp"
#include "core/config/policy_sections.hpp"
#include "core/config/sweep_spec.hpp"
#include "core/data/token_source.hpp"
#include "core/device/compute_device.hpp"
#include "core/device/cuda_runtime.hpp"
#include "core/pipeline/instance_table.hpp"
#include "core/replay/expert_load_csv.hpp"
#include "core/replay/plan_replay.hpp"
#include "core/replay/routing_npy.hpp"
#include "core/system/blas_probe.hpp"
#include "core/train/trainer.hpp"
#include "runner/count_option.hpp"
#include "runner/database_option.hpp"
#include "runner/experiment_options.hpp"
#include "runner/interrupt.hpp"
#include "runner/plugin_failure_report.hpp"
#include "runner/replay_outcome.hpp"
#include "runner/run_command.hpp"
#include "runner/run_info.hpp"
#include "runner/run_recorder.hpp"
#include "store/results_store.hpp"

namespace lrmoe {
namespace {

struct ReplayVariant {
  std::string label;
  std::vector<std::string> settings;  // section.key=value
};

// "section.key=value" as (key, value).
std::pair<std::string, std::string> key_and_value(const std::string& setting) {
  const std::size_t equals = setting.find('=');
  if (equals == std::string::npos) return {setting, ""};
  return {setting.substr(0, equals), setting.substr(equals + 1)};
}

std::vector<ReplayVariant> parse_variants(const std::vector<std::string>& texts) {
  if (texts.empty()) {
    std::vector<ReplayVariant> bundles;
    for (const std::string& bundle : bundle_names())
      bundles.push_back({bundle, {"policies.bundle=" + bundle}});
    return bundles;
  }
  const std::vector<std::string> bundles = bundle_names();
  std::vector<ReplayVariant> variants;
  for (const std::string& text : texts) {
    const std::size_t colon = text.find(':');
    if (colon == std::string::npos) {
      if (std::find(bundles.begin(), bundles.end(), text) == bundles.end()) {
        throw std::invalid_argument(
            fmt::format("--variant {}: not a policy bundle ({}); name any other variant as "
                        "LABEL:section.key=value,section.key=value",
                        text, fmt::join(bundles, ", ")));
      }
      variants.push_back({text, {"policies.bundle=" + text}});
      continue;
    }
    ReplayVariant v{text.substr(0, colon), {}};
    std::istringstream settings(text.substr(colon + 1));
    for (std::string setting; std::getline(settings, setting, ',');) v.settings.push_back(setting);
    if (v.label.empty() || v.settings.empty()) {
      throw std::invalid_argument(fmt::format(
          "--variant {}: expected LABEL:section.key=value,... with a label and at least one "
          "setting",
          text));
    }
    variants.push_back(std::move(v));
  }
  return variants;
}

// One variant, resolved and loaded before anything replays.
struct PreparedVariant {
  ReplayVariant variant;
  Experiment experiment;
  std::shared_ptr<const PolicySet> policies;
  HardwareProfile profile;
};

PreparedVariant prepare(const ExperimentSource& base, const ReplayVariant& variant) {
  ReplayExperiment r = prepare_replay(base, variant.settings, "variant " + variant.label);
  return {variant, std::move(r.experiment), std::move(r.policies), std::move(r.profile)};
}

std::shared_ptr<const ExpertLoads> loads_for(const ReplayOptions& options,
                                             const std::optional<RecordedExpertLoads>& recorded,
                                             const Experiment& e) {
  const int64_t moe_layers = moe_layer_count(e.model);
  if (options.skew) {
    return std::make_shared<SkewedLoads>(parse_skew(*options.skew), e.model.num_experts,
                                         e.experiment.seed);
  }
  return std::make_shared<RecordedLoads>(*recorded, e.model.num_experts, moe_layers);
}

// The variants as the cells of the sweep the replay is recorded as; returns each one's tag.
std::vector<SweepCellTag> record_as_sweep(ResultsStore& store, const std::string& name,
                                          const std::string& file,
                                          const std::vector<PreparedVariant>& variants) {
  SweepRecord record{name, file, {}, SweepKind::Replay};
  for (const PreparedVariant& p : variants) {
    SweepCellRecord cell{fmt::format("{}", fmt::join(p.variant.settings, ", ")),
                         p.variant.label,
                         experiment_identity(p.experiment),
                         {},
                         "",
                         p.variant.label};
    for (const std::string& setting : p.variant.settings)
      cell.values.push_back(key_and_value(setting));
    record.cells.push_back(std::move(cell));
  }
  const SweepCellNumbers numbers = store.record_sweep(record);
  std::vector<SweepCellTag> tags;
  for (int64_t cell : numbers.cells) tags.push_back({numbers.sweep, cell});
  return tags;
}

// `allocate`: the device to allocate the busiest pass on (--allocate), if any.
ReplayOutcome replay_variant(const PreparedVariant& p, const ReplayOptions& options,
                             std::shared_ptr<const ExpertLoads> loads, ResultsStore* store,
                             std::optional<SweepCellTag> cell, const std::string& blas,
                             const std::optional<torch::Device>& allocate) {
  ReplayOutcome o;
  o.label = p.variant.label;
  o.policies = policy_names(p.experiment.policies);
  std::unique_ptr<RunRecorder> recorder;
  try {
    PlanReplay replay(p.experiment, p.policies, p.profile, loads, /*moe_layers=*/0,
                      options.processes);
    o.memory_per_rank = replay.budget().memory_per_rank;
    o.costs = replay.memory_costs();
    o.fixed = StaticMemory{replay.budget().optimizer_bytes, replay.budget().dense_bytes};
    if (store) {
      RunInfo info = run_info(p.experiment, p.profile, o.memory_per_rank, blas, options.processes);
      info.replay = true;
      info.target_loss.reset();  // nothing trains, so there is nothing to reach
      info.load_source = loads->describe();
      info.sweep_cell = cell;
      o.run = store->begin_run(info);
      store->add_plugins(*o.run, plugin_rows(*p.policies));
      store->add_event(*o.run, "info", "replay: " + loads->describe());
      recorder = std::make_unique<RunRecorder>(*store, *o.run, nullptr);
    }
    for (int64_t step = 1; step <= options.steps; ++step) {
      if (interrupt_requested()) {
        o.stopped = true;
        break;
      }
      const StepReport report = replay.step(step);
      if (recorder) recorder->on_step(report);
      add_replay_step(o, report);
    }
  } catch (const PlanError& error) {
    o.failed = error.what();
  }
  if (allocate && !o.busiest_pass.empty()) {
    try {
      o.allocated = allocate_timeline(o.costs, o.busiest_pass, o.fixed, *allocate);
    } catch (const c10::Error& error) {
      o.allocation_failed = error.what_without_backtrace();
    }
    if (store && o.run && o.allocated) {
      store->add_event(*o.run, "info",
                       fmt::format("--allocate: rank {}'s busiest pass, modeled {} bytes, the "
                                   "allocator's peak {} bytes over {} buffers",
                                   o.busiest_rank, o.allocated->modeled, o.allocated->allocated,
                                   o.allocated->buffers));
    }
  }
  if (store && o.run) {
    if (o.failed) store->add_event(*o.run, "error", *o.failed);
    store->finish_run(*o.run,
                      o.failed    ? "failed"
                      : o.stopped ? "stopped"
                                  : "finished",
                      std::nullopt);
  }
  return o;
}

}  // namespace

CLI::App* add_replay_command(CLI::App& app, ReplayOptions& options) {
  CLI::App* command = app.add_subcommand(
      "replay",
      "plan an experiment at its model's full size without training: memory, replicas and "
      "modeled MoE time per policy variant");
  add_experiment_options(command, options.source, false);
  add_database_option(command, options.source.database,
                      "results database for --loads-from and --record (overrides store.path)");
  command->add_option("--skew", options.skew,
                      "synthetic routing: zipf:S, expert shares proportional to 1/rank^S");
  command->add_option("--loads-from", options.loads_from,
                      "routing from a run's recorded per-expert loads (its last --steps steps)");
  command->add_option("--loads-csv", options.loads_csv,
                      "routing from per-expert loads in a CSV file with columns step, layer, "
                      "expert, pairs (what `lrmoe export RUN --format expert-loads` writes)");
  command->add_option("--routing-npy", options.routing_npy,
                      "routing from every token's expert ids, an integer array [tokens, layers, "
                      "top_k] saved by numpy.save; each replay step counts the next "
                      "batch_size x seq_len x micro_batches tokens");
  repeatable(command->add_option(
      "--variant", options.variants,
      "a bundle (fixed, symi, lrmoe) or LABEL:section.key=value,... (repeatable; default: the "
      "three bundles)"));
  command->add_option("--steps", options.steps, "optimizer steps to replay")
      ->check(count_between(1, 1000000));
  command->add_option("--record", options.record_as,
                      "record each variant as a replay run, a cell of the sweep NAME");
  command
      ->add_option("--processes", options.processes,
                   "plan as N processes (threads here) of cluster.ranks / N ranks each, each "
                   "planning its own pairs; the plan time is the slowest one's CPU time")
      ->check(count_between(1, 4096));
  command->add_flag("--allocate", options.allocate,
                    "on a GPU: allocate the busiest rank's buffers of the plan and report the "
                    "allocator's peak beside the model's");
  return command;
}

double parse_skew(const std::string& text, const std::string& option) {
  const std::string prefix = "zipf:";
  double exponent = std::numeric_limits<double>::quiet_NaN();
  if (text.rfind(prefix, 0) == 0) {
    std::istringstream in(text.substr(prefix.size()));
    if (!(in >> exponent) || !in.eof()) exponent = std::numeric_limits<double>::quiet_NaN();
  }
  if (!std::isfinite(exponent) || exponent < 0) {
    throw std::invalid_argument(fmt::format(
        "{} {}: expected zipf:S with S >= 0 (expert shares proportional to 1/rank^S; 0 is "
        "balanced)",
        option, text));
  }
  return exponent;
}

ReplayExperiment prepare_replay(const ExperimentSource& base,
                                const std::vector<std::string>& settings,
                                const std::string& label) {
  ExperimentSource source = base;
  source.overrides.insert(source.overrides.end(), settings.begin(), settings.end());
  const std::string where = fmt::format("{} ({})", experiment_place(base), label);
  ReplayExperiment r{load_experiment_source(source), nullptr, {}};
  try {
    if (r.experiment.model.vocab_size == 0) {
      const auto data = make_token_source(r.experiment.data, r.experiment.experiment.seed,
                                          r.experiment.train.seq_len);
      r.experiment.model = resolve_model_vocabulary(r.experiment.model, data->vocab_size());
    }
    r.profile = resolve_hardware_profile(r.experiment.cluster.profile, r.experiment.cluster.ranks);
  } catch (const std::invalid_argument& error) {
    throw std::runtime_error(fmt::format("{}: {}", where, error.what()));
  }
  // A plugin that crashes or hangs while it plans the replay is reported (the first replay's
  // experiment names them all).
  watch_plugin_failures(experiment_place(base), r.experiment.policies.call_timeout);
  r.policies = load_located_policy_set(r.experiment.policies, where);
  return r;
}

int replay_command(const ReplayOptions& options, std::ostream& out) {
  if (options.skew.has_value() + options.loads_from.has_value() + options.loads_csv.has_value() +
          options.routing_npy.has_value() !=
      1) {
    throw std::invalid_argument(
        "replay: give one load source: --skew zipf:S (synthetic), --loads-from RUN (a run's "
        "recorded per-expert loads in --db), --loads-csv FILE or --routing-npy FILE");
  }
  if (options.skew) parse_skew(*options.skew);
  std::optional<torch::Device> allocate;
  if (options.allocate) {
    allocate = resolve_device(DeviceChoice::Auto, /*local_rank=*/0);
    if (!allocate->is_cuda() || !peak_allocated_bytes(*allocate)) {
      throw std::invalid_argument(
          "replay --allocate: needs a GPU, whose caching allocator's peak it reports; this "
          "build or machine has none (a CUDA build of lrmoe on a machine with a visible GPU)");
    }
  }
  // Every variant resolves, and its plugins load, before anything replays or is written.
  std::vector<PreparedVariant> prepared;
  for (const ReplayVariant& v : parse_variants(options.variants)) {
    prepared.push_back(prepare(options.source, v));
    if (const std::string problem = replay_problem(prepared.back().experiment, options.processes);
        !problem.empty()) {
      throw std::invalid_argument(
          fmt::format("{} (variant {}): {}", experiment_place(options.source), v.label, problem));
    }
  }
  // The plan's parts are timed by each planning thread's CPU time (PlanClock::ThreadCpu), which
  // counts all of a part's work only when LibTorch runs it in that thread: one core a process.
  torch::set_num_threads(1);
  const std::string database = prepared.front().experiment.store.path;

  if (options.record_as) {
    if (const std::string problem = sweep_name_problem(*options.record_as); !problem.empty())
      throw std::invalid_argument(
          fmt::format("replay: --record '{}': {}", *options.record_as, problem));
  }
  std::optional<RecordedExpertLoads> recorded;
  if (options.loads_from) {
    const auto reader = ResultsStore::open_read_only(database);
    ExpertLoadHistory history = reader->expert_load_history(*options.loads_from, options.steps);
    recorded = RecordedExpertLoads{fmt::format("run {} of {}", *options.loads_from, database),
                                   std::move(history.steps), std::move(history.pairs)};
  } else if (options.loads_csv) {
    recorded = read_expert_load_csv(*options.loads_csv);
  } else if (options.routing_npy) {
    // The file is cut into steps once, so every variant must take as many tokens a step.
    auto step_tokens = [](const PreparedVariant& p) {
      const TrainConfig& train = p.experiment.train;
      return train.batch_size * train.seq_len * train.micro_batches;
    };
    for (const PreparedVariant& p : prepared) {
      if (step_tokens(p) != step_tokens(prepared.front()))
        throw std::invalid_argument(fmt::format(
            "replay --routing-npy: variant {} takes {} tokens a step, variant {} {}; the routing "
            "is cut into steps once, so give the variants the same train.batch_size, seq_len and "
            "micro_batches",
            p.variant.label, step_tokens(p), prepared.front().variant.label,
            step_tokens(prepared.front())));
    }
    recorded = read_routing_npy(*options.routing_npy, step_tokens(prepared.front()));
  }
  std::unique_ptr<ResultsStore> store;
  std::vector<SweepCellTag> cells;
  if (options.record_as) {
    store = ResultsStore::open(database);
    cells = record_as_sweep(*store, *options.record_as, experiment_place(options.source), prepared);
  }
  const BlasReport blas = probe_blas();
  const std::string blas_text =
      fmt::format("{} ({:.0f} GFLOP/s)", blas.library, blas.matmul_gflops);

  const Experiment& first = prepared.front().experiment;
  const ModelConfig& model = first.model;
  out << fmt::format(
      "replay of {}: model {} ({} MoE layers of {} experts, top {}), {} ranks, "
      "memory_per_rank {}, {} tokens per micro-batch x {}, {} steps, hardware profile {}, "
      "planned by {}\n",
      experiment_place(options.source), model.preset, moe_layer_count(model), model.num_experts,
      model.top_k, first.cluster.ranks, first.cluster.memory_per_rank,
      first.train.batch_size * first.train.seq_len, first.train.micro_batches, options.steps,
      prepared.front().profile.name,
      options.processes == 1
          ? std::string("one process")
          : fmt::format("{} processes of {} ranks (threads here)", options.processes,
                        first.cluster.ranks / options.processes));

  std::vector<ReplayOutcome> outcomes;
  const auto started = std::chrono::steady_clock::now();
  // Ctrl-C stops the variant at its next step and starts no other.
  install_interrupt_handler();
  for (std::size_t i = 0; i < prepared.size() && !interrupt_requested(); ++i) {
    const auto loads = loads_for(options, recorded, prepared[i].experiment);
    if (i == 0) out << "loads: " << loads->describe() << "\n\n";
    outcomes.push_back(replay_variant(
        prepared[i], options, loads, store.get(),
        cells.empty() ? std::nullopt : std::optional<SweepCellTag>(cells[i]), blas_text, allocate));
  }
  print_replay_outcomes(outcomes, out);
  out << fmt::format(
      "\nreplayed in {:.1f} s{}\n",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
      store ? fmt::format("; recorded in {}: lrmoe compare --sweep '{}' --db {}", database,
                          *options.record_as, database)
            : "");
  if (interrupt_requested()) {
    out << fmt::format("stopped by Ctrl-C: {} of {} variants replayed, the last after {} steps\n",
                       outcomes.size(), prepared.size(),
                       outcomes.empty() ? 0 : outcomes.back().steps);
    return 130;
  }
  return 0;
}

}  // namespace lrmoe
