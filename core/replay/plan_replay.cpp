#include "core/replay/plan_replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>
#include <thread>

#include "core/data/seeded_rng.hpp"
#include "core/distributed/thread_meeting.hpp"
#include "core/pipeline/deferred_returns.hpp"
#include "core/pipeline/memory_timeline.hpp"
#include "core/pipeline/pass_accounting.hpp"
#include "core/pipeline/stable_order.hpp"
#include "core/replay/replay_pairs.hpp"
#include "core/system/thread_heaps.hpp"

namespace lrmoe {
namespace {

constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

// What only a training run measures, marked as such in one layer's statistics.
void mark_unmeasured(LayerStepStatistics& layer, int64_t ranks) {
  layer.forward_seconds = kNotMeasured;
  layer.backward_seconds = kNotMeasured;
  for (auto& seconds : layer.critical_path.rank_seconds)
    seconds.assign(static_cast<std::size_t>(ranks), kNotMeasured);
  layer.critical_path.seconds = kNotMeasured;
  layer.critical_path.rank_sum = kNotMeasured;
}

// Runs `work(p)` for every process p: on a thread each when there are several (they meet in
// collectives), each with a heap of its own as a process has, else in this thread. Rethrows the
// lowest process's failure. A process that fails while the others wait in a collective ends their
// wait by cluster.timeout (PeerError); the plans' failures (budget checks on global loads) are
// every process's alike.
template <typename Work>
void on_every_process(int64_t processes, Work&& work) {
  if (processes == 1) {
    work(int64_t{0});
    return;
  }
  // A thread's own failure, and the failures of those left waiting for it (PeerError).
  std::vector<std::exception_ptr> failed(static_cast<std::size_t>(processes));
  std::vector<std::exception_ptr> left_waiting(static_cast<std::size_t>(processes));
  allow_own_heaps(processes);
  std::vector<std::thread> threads;
  for (int64_t p = 0; p < processes; ++p) {
    threads.emplace_back([&, p] {
      try {
        work(p);
      } catch (const PeerError&) {
        left_waiting[static_cast<std::size_t>(p)] = std::current_exception();
      } catch (...) {
        failed[static_cast<std::size_t>(p)] = std::current_exception();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const auto* failures : {&failed, &left_waiting})
    for (const std::exception_ptr& failure : *failures)
      if (failure) std::rethrow_exception(failure);
}

// One process's share of a replayed pass: its home ranks' pairs, in pair order, and their
// backward signals.
struct ProcessPairs {
  ReplayPairs pairs;
  PairBatch signals;  // gates and norms of every routed pair; the plan takes its computed ones
};

PairBatch signal_rows(const PairBatch& all, const torch::Tensor& rows) {
  PairBatch picked;
  picked.gates = all.gates.index_select(0, rows);
  picked.upstream_norm = all.upstream_norm.index_select(0, rows);
  picked.input_norm = all.input_norm.index_select(0, rows);
  picked.hidden_norm = all.hidden_norm.index_select(0, rows);
  return picked;
}

// `pairs` and their `signals` split by the process that homes them (ranks [p * R/P, (p + 1) *
// R/P)), each part in pair order.
std::vector<ProcessPairs> split_by_process(const ReplayPairs& pairs, const PairBatch& signals,
                                           int64_t ranks, int64_t processes) {
  if (processes == 1) return {{pairs, signals}};
  const torch::Tensor process = pairs.home.div(ranks / processes, "floor");
  const torch::Tensor order = stable_order(process, processes);
  const torch::Tensor counts = torch::bincount(process, {}, processes);
  std::vector<ProcessPairs> parts;
  int64_t first = 0;
  for (int64_t p = 0; p < processes; ++p) {
    const int64_t n = counts[p].item<int64_t>();
    const torch::Tensor rows = order.narrow(0, first, n);
    first += n;
    parts.push_back({{pairs.experts.index_select(0, rows), pairs.gates.index_select(0, rows),
                      pairs.home.index_select(0, rows)},
                     signal_rows(signals, rows)});
  }
  return parts;
}

}  // namespace

std::string replay_problem(const Experiment& experiment, int64_t processes) {
  const int64_t ranks = experiment.cluster.ranks;
  const int64_t tokens = experiment.train.batch_size * experiment.train.seq_len;
  if (moe_layer_count(experiment.model) == 0)
    return "the model has no MoE layers to plan (model.moe_as_dense = true, or model.first_k_dense "
           "= model.num_layers); replay an experiment whose model routes to experts";
  if (processes < 1) return fmt::format("--processes {} is not a process count", processes);
  if (ranks % processes != 0)
    return fmt::format(
        "--processes {}: that many processes cannot share cluster.ranks = {} evenly; give a "
        "divisor of {}",
        processes, ranks, ranks);
  if (tokens % processes != 0)
    return fmt::format(
        "--processes {}: that many processes cannot share a micro-batch's {} tokens "
        "(train.batch_size x train.seq_len) evenly; give a divisor of {}",
        processes, tokens, tokens);
  return "";
}

PlanReplay::PlanReplay(const Experiment& experiment, std::shared_ptr<const PolicySet> policies,
                       HardwareProfile profile, std::shared_ptr<const ExpertLoads> loads,
                       int64_t moe_layers, int64_t processes)
    : experiment_(experiment),
      loads_(std::move(loads)),
      budget_(rank_budget(experiment.model, experiment.train, experiment.cluster,
                          pair_costs(experiment.model, experiment),
                          experiment.policies.optimizer_state)),
      profile_(std::move(profile)),
      memory_costs_(pair_costs(experiment.model, experiment).memory) {
  if (const std::string problem = replay_problem(experiment, processes); !problem.empty())
    throw std::invalid_argument(problem);
  processes_.resize(static_cast<std::size_t>(processes));
  const auto meeting = std::make_shared<ThreadMeeting>(
      processes,
      std::chrono::milliseconds(static_cast<int64_t>(experiment.cluster.timeout * 1000)));
  const ModelConfig& model = experiment_.model;
  const int64_t all_layers = moe_layer_count(model);
  const int64_t layers = moe_layers > 0 ? std::min(moe_layers, all_layers) : all_layers;
  for (int64_t p = 0; p < processes; ++p) {
    Process& process = processes_[static_cast<std::size_t>(p)];
    process.collectives = Collectives::join_threads(meeting, p);
    for (int64_t l = 0; l < layers; ++l) {
      PipelineSettings settings = pipeline_settings(experiment_, model, l, budget_, profile_);
      settings.process.index = p;
      settings.process.processes = processes;
      settings.plan_clock = PlanClock::ThreadCpu;
      process.pipelines.push_back(
          std::make_shared<ExpertPipeline>(policies, settings, process.collectives));
    }
  }
}

StepReport PlanReplay::step(int64_t step) {
  const ModelConfig& model = experiment_.model;
  const TrainConfig& train = experiment_.train;
  const int64_t ranks = experiment_.cluster.ranks;
  const auto processes = static_cast<int64_t>(processes_.size());
  const std::size_t layers = processes_.front().pipelines.size();
  const int64_t tokens = train.batch_size * train.seq_len;  // one micro-batch, all ranks
  StepReport report;
  report.step = step;
  report.train_loss = report.aux_loss = report.lr = report.grad_norm = kNotMeasured;
  report.step_seconds = report.moe_seconds = report.moe_critical_seconds = kNotMeasured;
  report.tokens = tokens * train.micro_batches;

  std::vector<std::vector<int64_t>> routed(layers);
  for (Process& process : processes_)
    for (auto& pipeline : process.pipelines) pipeline->set_step(step);
  for (int64_t micro = 0; micro < train.micro_batches; ++micro) {
    // [layer][process]: each process's pairs of the pass, made before any plan is timed
    std::vector<std::vector<ProcessPairs>> passes;
    for (std::size_t l = 0; l < layers; ++l) {
      const auto layer = static_cast<int64_t>(l);
      const std::vector<int64_t> counts =
          expert_counts_from_shares(loads_->shares(step, layer), tokens, model.top_k);
      const uint64_t seed =
          stream_seed(experiment_.experiment.seed, SeedStream::Train, static_cast<uint64_t>(step),
                      static_cast<uint64_t>(micro), static_cast<uint64_t>(layer));
      const ReplayPairs pairs = replay_pairs(counts, tokens, model.top_k, ranks, seed);
      passes.push_back(
          split_by_process(pairs, replay_signals(pairs.gates, seed), ranks, processes));
      if (routed[l].empty()) routed[l].assign(counts.size(), 0);
      for (std::size_t e = 0; e < counts.size(); ++e) routed[l][e] += counts[e];
    }
    on_every_process(processes, [&](int64_t p) {
      const auto at = static_cast<std::size_t>(p);
      for (std::size_t l = 0; l < layers; ++l) {
        const ProcessPairs& mine = passes[l][at];
        ExpertPipeline& pipeline = *processes_[at].pipelines[l];
        const auto forward = pipeline.plan_forward(mine.pairs.experts, mine.pairs.gates,
                                                   mine.pairs.home, tokens / processes);
        // As training does: the next layer's placement planned behind this layer's compute,
        // where it allows (Note [Overlapped expert fetch]).
        if (l + 1 < layers && processes_[at].pipelines[l + 1]->places_ahead()) {
          processes_[at].pipelines[l + 1]->place_ahead(
              tokens / processes, mine.pairs.experts.device(),
              modeled_fetch_cover(pipeline.settings(), *forward));
        }
        pipeline.plan_backward(*forward, signal_rows(mine.signals, forward->local_pairs));
      }
    });
  }

  // Every process's statistics; the plan's figures are process 0's, the planning time the
  // slowest process's.
  std::vector<std::vector<LayerStepStatistics>> statistics(processes_.size());
  std::size_t slowest = 0;
  double longest = -1;
  for (std::size_t p = 0; p < processes_.size(); ++p) {
    double planning = 0;
    for (auto& pipeline : processes_[p].pipelines) {
      statistics[p].push_back(pipeline->take_statistics());
      planning += statistics[p].back().overhead.total();
    }
    if (planning > longest) {
      longest = planning;
      slowest = p;
    }
  }
  hide_deferred_returns(statistics.front());
  for (std::size_t l = 0; l < layers; ++l) {
    LayerStepStatistics layer = std::move(statistics.front()[l]);
    const LayerStepStatistics& planned_longest = statistics[slowest][l];
    layer.overhead = planned_longest.overhead;
    for (int phase = 0; phase < kPhases; ++phase) {
      layer.planning_seconds[phase] = planned_longest.planning_seconds[phase];
      layer.plan_spans[phase] = planned_longest.plan_spans[phase];
    }
    mark_unmeasured(layer, ranks);
    report.moe_modeled_seconds += layer.modeled.total();
    report.layers.push_back(std::move(layer));
    report.expert_load.push_back({model.first_k_dense + static_cast<int64_t>(l), routed[l]});
  }
  cumulative_modeled_ += report.moe_modeled_seconds;
  report.cumulative_moe_modeled_seconds = cumulative_modeled_;
  report.cumulative_step_seconds = report.cumulative_moe_seconds =
      report.cumulative_moe_critical_seconds = kNotMeasured;
  if (layers > 0) {
    report.rank_memory = step_memory_peaks(
        processes_.front().pipelines.front()->settings().costs.memory, report.layers,
        StaticMemory{budget_.optimizer_bytes, budget_.dense_bytes});
  }
  return report;
}

}  // namespace lrmoe
