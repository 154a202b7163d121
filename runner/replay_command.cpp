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
#include "core/data/token_source.hpp"
#include "core/device/compute_device.hpp"
#include "core/device/cuda_runtime.hpp"
#include "core/pipeline/instance_table.hpp"
#include "core/pipeline/memory_timeline.hpp"
#include "core/replay/allocated_timeline.hpp"
#include "core/replay/plan_replay.hpp"
#include "core/system/blas_probe.hpp"
#include "core/train/trainer.hpp"
#include "runner/run_info.hpp"
#include "runner/run_recorder.hpp"
#include "runner/text_table.hpp"
#include "store/results_store.hpp"

namespace lrmoe {
namespace {

// The unit of a table's memory columns: GiB, or MiB when every figure is below a GiB.
struct MemoryUnit {
  const char* name;
  double bytes;
};

struct Variant {
  std::string label;
  std::vector<std::string> settings;  // section.key=value
};

// "section.key=value" as (key, value).
std::pair<std::string, std::string> key_and_value(const std::string& setting) {
  const std::size_t equals = setting.find('=');
  if (equals == std::string::npos) return {setting, ""};
  return {setting.substr(0, equals), setting.substr(equals + 1)};
}

std::vector<Variant> parse_variants(const std::vector<std::string>& texts) {
  if (texts.empty()) {
    std::vector<Variant> bundles;
    for (const std::string& bundle : bundle_names())
      bundles.push_back({bundle, {"policies.bundle=" + bundle}});
    return bundles;
  }
  const std::vector<std::string> bundles = bundle_names();
  std::vector<Variant> variants;
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
    Variant v{text.substr(0, colon), {}};
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

// "zipf:1.2" as its exponent.
double parse_skew(const std::string& text) {
  const std::string prefix = "zipf:";
  double exponent = std::numeric_limits<double>::quiet_NaN();
  if (text.rfind(prefix, 0) == 0) {
    std::istringstream in(text.substr(prefix.size()));
    if (!(in >> exponent) || !in.eof()) exponent = std::numeric_limits<double>::quiet_NaN();
  }
  if (!std::isfinite(exponent) || exponent < 0) {
    throw std::invalid_argument(fmt::format(
        "--skew {}: expected zipf:S with S >= 0 (expert shares proportional to 1/rank^S; 0 is "
        "balanced)",
        text));
  }
  return exponent;
}

// One variant, resolved and loaded before anything replays.
struct PreparedVariant {
  Variant variant;
  Experiment experiment;
  std::shared_ptr<const PolicySet> policies;
  HardwareProfile profile;
};

PreparedVariant prepare(const ExperimentSource& base, const Variant& variant) {
  ExperimentSource source = base;
  source.overrides.insert(source.overrides.end(), variant.settings.begin(), variant.settings.end());
  const std::string where = fmt::format(
      "{} (variant {})", base.file.value_or("<built-in default experiment>"), variant.label);
  PreparedVariant p{variant, load_experiment_source(source), nullptr, {}};
  try {
    if (p.experiment.model.vocab_size == 0) {
      const auto data = make_token_source(p.experiment.data, p.experiment.experiment.seed,
                                          p.experiment.train.seq_len);
      p.experiment.model = resolve_model_vocabulary(p.experiment.model, data->vocab_size());
    }
    p.profile = resolve_hardware_profile(p.experiment.cluster.profile, p.experiment.cluster.ranks);
  } catch (const std::invalid_argument& error) {
    throw std::runtime_error(fmt::format("{}: {}", where, error.what()));
  }
  p.policies = std::make_shared<const PolicySet>(load_policy_set(p.experiment.policies));
  return p;
}

// What one variant's replay showed.
struct Outcome {
  std::string label;
  std::string policies;
  std::optional<int64_t> run;         // with --record
  std::optional<std::string> failed;  // the plan that did not fit, and why
  int64_t steps = 0;                  // replayed in full
  int64_t memory_per_rank = 0;
  std::vector<int64_t> subtotal, total;  // [ranks]: the peak over the steps
  // [ranks]: the largest subtotal of one MoE layer on its own (layer_subtotal_bytes)
  std::vector<int64_t> layer_subtotal;
  // The pass with the largest modeled total of any rank: that rank's holdings per MoE layer.
  std::vector<LayerHolding> busiest_pass;
  int64_t busiest_rank = 0;
  int64_t busiest_total = -1;
  StaticMemory fixed;
  // With --allocate: the allocator's peak for the busiest pass, or why there is none.
  std::optional<AllocatedPeak> allocated;
  std::optional<std::string> allocation_failed;
  double replicas = 0;  // summed over steps and layers
  int64_t layer_steps = 0;
  int64_t routed = 0, dropped = 0, kept = 0;
  double modeled = 0;   // MoE seconds, summed over steps
  double planning = 0;  // wall seconds of the plans on this machine, summed over steps
};

// Keeps the pass of `report` whose modeled total is the largest of any rank so far.
void keep_busiest_pass(Outcome& o, const StepReport& report, const MemoryCosts& costs) {
  if (report.layers.empty()) return;
  const std::size_t passes = report.layers.front().passes.size();
  for (std::size_t pass = 0; pass < passes; ++pass) {
    const std::size_t ranks = report.layers.front().passes[pass].size();
    for (std::size_t r = 0; r < ranks; ++r) {
      std::vector<LayerHolding> holdings;
      for (const LayerStepStatistics& layer : report.layers)
        holdings.push_back(layer.passes[pass][r]);
      const int64_t total = pass_peak(costs, holdings, o.fixed).at_peak.total();
      if (total > o.busiest_total) {
        o.busiest_total = total;
        o.busiest_rank = static_cast<int64_t>(r);
        o.busiest_pass = std::move(holdings);
      }
    }
  }
}

void add_step(Outcome& o, const StepReport& report, const MemoryCosts& costs) {
  ++o.steps;
  keep_busiest_pass(o, report, costs);
  o.modeled += report.moe_modeled_seconds;
  for (const LayerStepStatistics& layer : report.layers) {
    o.replicas += static_cast<double>(layer.replicas);
    ++o.layer_steps;
    o.routed += layer.pairs_routed;
    o.dropped += layer.pairs_dropped;
    o.kept += layer.pairs_kept;
    o.planning += layer.overhead.total();
  }
  for (const LayerStepStatistics& layer : report.layers) {
    for (const std::vector<LayerHolding>& pass : layer.passes) {
      o.layer_subtotal.resize(pass.size(), 0);
      for (std::size_t r = 0; r < pass.size(); ++r) {
        o.layer_subtotal[r] =
            std::max(o.layer_subtotal[r],
                     static_cast<int64_t>(std::llround(layer_subtotal_bytes(costs, pass[r]))));
      }
    }
  }
  o.subtotal.resize(report.rank_memory.size(), 0);
  o.total.resize(report.rank_memory.size(), 0);
  for (std::size_t r = 0; r < report.rank_memory.size(); ++r) {
    o.subtotal[r] = std::max(o.subtotal[r], report.rank_memory[r].subtotal);
    o.total[r] = std::max(o.total[r], report.rank_memory[r].at_peak.total());
  }
}

std::shared_ptr<const ExpertLoads> loads_for(const ReplayOptions& options,
                                             const std::optional<ExpertLoadHistory>& history,
                                             const std::string& history_origin,
                                             const Experiment& e) {
  const int64_t moe_layers = e.model.num_layers - e.model.first_k_dense;
  if (options.skew) {
    return std::make_shared<SkewedLoads>(parse_skew(*options.skew), e.model.num_experts,
                                         e.experiment.seed);
  }
  RecordedExpertLoads recorded{history_origin, history->steps, history->pairs};
  return std::make_shared<RecordedLoads>(std::move(recorded), e.model.num_experts, moe_layers);
}

// The variants as the cells of the sweep the replay is recorded as; returns each one's tag.
std::vector<SweepCellTag> record_as_sweep(ResultsStore& store, const std::string& name,
                                          const std::string& file,
                                          const std::vector<PreparedVariant>& variants) {
  SweepRecord record{name, file, {}};
  for (const PreparedVariant& p : variants) {
    SweepCellRecord cell{fmt::format("{}", fmt::join(p.variant.settings, ", ")),
                         p.variant.label,
                         experiment_identity(p.experiment),
                         {}};
    for (const std::string& setting : p.variant.settings)
      cell.values.push_back(key_and_value(setting));
    record.cells.push_back(std::move(cell));
  }
  const SweepCellNumbers numbers = store.record_sweep(record);
  std::vector<SweepCellTag> tags;
  for (int64_t cell : numbers.cells) tags.push_back({numbers.sweep, cell});
  return tags;
}

MemoryCosts costs_of(const PreparedVariant& p) {
  return pair_costs(p.experiment.model, p.experiment.policies.recompute).memory;
}

// `allocate`: the device to allocate the busiest pass on (--allocate), if any.
Outcome replay_variant(const PreparedVariant& p, const ReplayOptions& options,
                       std::shared_ptr<const ExpertLoads> loads, ResultsStore* store,
                       std::optional<SweepCellTag> cell, const std::string& blas,
                       const std::optional<torch::Device>& allocate) {
  Outcome o;
  o.label = p.variant.label;
  o.policies = policy_names(p.experiment.policies);
  std::unique_ptr<RunRecorder> recorder;
  try {
    PlanReplay replay(p.experiment, p.policies, p.profile, loads);
    o.memory_per_rank = replay.budget().memory_per_rank;
    o.fixed = StaticMemory{replay.budget().optimizer_bytes, replay.budget().dense_bytes};
    if (store) {
      RunInfo info = run_info(p.experiment, p.profile, o.memory_per_rank, blas, 1);
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
      const StepReport report = replay.step(step);
      if (recorder) recorder->on_step(report);
      add_step(o, report, replay.memory_costs());
    }
  } catch (const PlanError& error) {
    o.failed = error.what();
  }
  if (allocate && !o.busiest_pass.empty()) {
    try {
      o.allocated = allocate_timeline(costs_of(p), o.busiest_pass, o.fixed, *allocate);
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
    store->finish_run(*o.run, o.failed ? "failed" : "finished", std::nullopt);
  }
  return o;
}

MemoryUnit memory_unit(const std::vector<Outcome>& outcomes) {
  int64_t largest = 0;
  for (const Outcome& o : outcomes)
    for (int64_t total : o.total) largest = std::max(largest, total);
  if (largest >= int64_t{1} << 30) return {"GiB", 1024.0 * 1024.0 * 1024.0};
  return {"MiB", 1024.0 * 1024.0};
}

std::string in_unit(int64_t bytes, const MemoryUnit& unit) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / unit.bytes);
}

std::string percent(int64_t part, int64_t whole) {
  return whole > 0
             ? fmt::format("{:.1f}", 100.0 * static_cast<double>(part) / static_cast<double>(whole))
             : "-";
}

// The largest of `values` and the rank that has it: "12.31 (r3)".
std::string peak_text(const std::vector<int64_t>& values, const MemoryUnit& unit) {
  if (values.empty()) return "-";
  const auto it = std::max_element(values.begin(), values.end());
  return fmt::format("{} (r{})", in_unit(*it, unit), it - values.begin());
}

void print_outcomes(const std::vector<Outcome>& outcomes, std::ostream& out) {
  const MemoryUnit unit = memory_unit(outcomes);
  QueryResult summary;
  summary.columns = {"variant",
                     "policies",
                     fmt::format("budget {}", unit.name),
                     "fits",
                     "replicas/layer",
                     "dropped fwd %",
                     "kept bwd %",
                     fmt::format("peak subtotal {}", unit.name),
                     fmt::format("layer subtotal {}", unit.name),
                     fmt::format("peak total {}", unit.name),
                     "modeled MoE s/step",
                     "plan s/step",
                     "run"};
  auto text = [](std::string s) { return std::optional<std::string>(std::move(s)); };
  for (const Outcome& o : outcomes) {
    const double steps = std::max<int64_t>(o.steps, 1);
    summary.rows.push_back(
        {text(o.label), text(o.policies),
         o.memory_per_rank > 0 ? text(in_unit(o.memory_per_rank, unit)) : std::nullopt,
         text(o.failed ? fmt::format("no (after {} steps)", o.steps) : "yes"),
         text(o.layer_steps ? fmt::format("{:.1f}", o.replicas / static_cast<double>(o.layer_steps))
                            : "-"),
         text(percent(o.dropped, o.routed)), text(percent(o.kept, o.routed)),
         text(peak_text(o.subtotal, unit)), text(peak_text(o.layer_subtotal, unit)),
         text(peak_text(o.total, unit)),
         text(o.steps ? fmt::format("{:.4f}", o.modeled / steps) : "-"),
         text(o.steps ? fmt::format("{:.2f}", o.planning / steps) : "-"),
         o.run ? text(std::to_string(*o.run)) : std::nullopt});
  }
  out << render_text_table(summary, 48, "-");
  out << "peak subtotal: owned experts + replicas + token buffers over the step's timeline, all "
         "MoE layers; layer subtotal: the same for one MoE layer on its own, the largest; both "
         "at the rank named\n";
  for (const Outcome& o : outcomes)
    if (o.failed) out << fmt::format("\n{} does not fit: {}\n", o.label, *o.failed);
  for (const Outcome& o : outcomes) {
    if (o.allocated) {
      const AllocatedPeak& a = *o.allocated;
      out << fmt::format(
          "\n{}: --allocate: rank {}'s busiest pass, modeled peak {} {}, the allocator's peak {} "
          "{} ({:+.3f}%) over {} buffers\n",
          o.label, o.busiest_rank, in_unit(a.modeled, unit), unit.name, in_unit(a.allocated, unit),
          unit.name,
          100.0 * static_cast<double>(a.allocated - a.modeled) / static_cast<double>(a.modeled),
          a.buffers);
    } else if (o.allocation_failed) {
      out << fmt::format("\n{}: --allocate: rank {}'s busiest pass could not be allocated: {}\n",
                         o.label, o.busiest_rank, *o.allocation_failed);
    }
  }

  // Per rank, each variant's peak subtotal / total.
  std::size_t ranks = 0;
  for (const Outcome& o : outcomes) ranks = std::max(ranks, o.subtotal.size());
  if (ranks == 0) return;
  QueryResult per_rank;
  per_rank.columns.push_back("rank");
  for (const Outcome& o : outcomes)
    per_rank.columns.push_back(fmt::format("{} subtotal / total {}", o.label, unit.name));
  for (std::size_t r = 0; r < ranks; ++r) {
    std::vector<std::optional<std::string>> row{text(std::to_string(r))};
    for (const Outcome& o : outcomes) {
      row.push_back(r < o.subtotal.size()
                        ? text(fmt::format("{} / {}", in_unit(o.subtotal[r], unit),
                                           in_unit(o.total[r], unit)))
                        : std::nullopt);
    }
    per_rank.rows.push_back(std::move(row));
  }
  out << "\nper-rank peaks over the replayed steps (Note [Memory model]):\n"
      << render_text_table(per_rank, 40, "-");
}

}  // namespace

int replay_command(const ReplayOptions& options, std::ostream& out) {
  if (options.skew.has_value() == options.loads_from.has_value()) {
    throw std::invalid_argument(
        "replay: give one load source: --skew zipf:S (synthetic) or --loads-from RUN (a run's "
        "recorded per-expert loads in --db)");
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
  for (const Variant& v : parse_variants(options.variants))
    prepared.push_back(prepare(options.source, v));
  const std::string database = prepared.front().experiment.store.path;

  std::optional<ExpertLoadHistory> history;
  std::string history_origin;
  if (options.loads_from) {
    const auto reader = ResultsStore::open_read_only(database);
    history = reader->expert_load_history(*options.loads_from, options.steps);
    history_origin = fmt::format("run {} of {}", *options.loads_from, database);
  }
  std::unique_ptr<ResultsStore> store;
  std::vector<SweepCellTag> cells;
  if (options.record_as) {
    store = ResultsStore::open(database);
    cells =
        record_as_sweep(*store, *options.record_as,
                        options.source.file.value_or("<built-in default experiment>"), prepared);
  }
  const BlasReport blas = probe_blas();
  const std::string blas_text =
      fmt::format("{} ({:.0f} GFLOP/s)", blas.library, blas.matmul_gflops);

  const Experiment& first = prepared.front().experiment;
  const ModelConfig& model = first.model;
  out << fmt::format(
      "replay of {}: model {} ({} MoE layers of {} experts, top {}), {} ranks, "
      "memory_per_rank {}, {} tokens per micro-batch x {}, {} steps, hardware profile {}\n",
      options.source.file.value_or("<built-in default experiment>"), model.preset,
      model.num_layers - model.first_k_dense, model.num_experts, model.top_k, first.cluster.ranks,
      first.cluster.memory_per_rank, first.train.batch_size * first.train.seq_len,
      first.train.micro_batches, options.steps, prepared.front().profile.name);

  std::vector<Outcome> outcomes;
  const auto started = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < prepared.size(); ++i) {
    const auto loads = loads_for(options, history, history_origin, prepared[i].experiment);
    if (i == 0) out << "loads: " << loads->describe() << "\n\n";
    outcomes.push_back(replay_variant(
        prepared[i], options, loads, store.get(),
        cells.empty() ? std::nullopt : std::optional<SweepCellTag>(cells[i]), blas_text, allocate));
  }
  print_outcomes(outcomes, out);
  out << fmt::format(
      "\nreplayed in {:.1f} s{}\n",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
      store ? fmt::format("; recorded in {}: lrmoe compare --sweep '{}' --db {}", database,
                          *options.record_as, database)
            : "");
  return 0;
}

}  // namespace lrmoe
