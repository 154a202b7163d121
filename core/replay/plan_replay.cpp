#include "core/replay/plan_replay.hpp"

#include <algorithm>
#include <limits>

#include "core/data/seeded_rng.hpp"
#include "core/pipeline/memory_timeline.hpp"
#include "core/replay/replay_pairs.hpp"

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

}  // namespace

PlanReplay::PlanReplay(const Experiment& experiment, std::shared_ptr<const PolicySet> policies,
                       HardwareProfile profile, std::shared_ptr<const ExpertLoads> loads,
                       int64_t moe_layers)
    : experiment_(experiment),
      loads_(std::move(loads)),
      budget_(rank_budget(experiment.model, experiment.train, experiment.cluster,
                          pair_costs(experiment.model, experiment))),
      profile_(std::move(profile)),
      memory_costs_(pair_costs(experiment.model, experiment).memory) {
  const ModelConfig& model = experiment_.model;
  const auto collectives = std::make_shared<Collectives>();
  const int64_t all_layers = model.num_layers - model.first_k_dense;
  const int64_t layers = moe_layers > 0 ? std::min(moe_layers, all_layers) : all_layers;
  for (int64_t l = 0; l < layers; ++l) {
    PipelineSettings settings = pipeline_settings(experiment_, model, l, budget_, profile_);
    pipelines_.push_back(std::make_shared<ExpertPipeline>(policies, settings, collectives));
  }
}

StepReport PlanReplay::step(int64_t step) {
  const ModelConfig& model = experiment_.model;
  const TrainConfig& train = experiment_.train;
  const int64_t tokens = train.batch_size * train.seq_len;  // one micro-batch, all ranks
  StepReport report;
  report.step = step;
  report.train_loss = report.aux_loss = report.lr = report.grad_norm = kNotMeasured;
  report.step_seconds = report.moe_seconds = report.moe_critical_seconds = kNotMeasured;
  report.tokens = tokens * train.micro_batches;

  std::vector<std::vector<int64_t>> routed(pipelines_.size());
  for (auto& pipeline : pipelines_) pipeline->set_step(step);
  for (int64_t micro = 0; micro < train.micro_batches; ++micro) {
    for (std::size_t l = 0; l < pipelines_.size(); ++l) {
      const auto layer = static_cast<int64_t>(l);
      const std::vector<int64_t> counts =
          expert_counts_from_shares(loads_->shares(step, layer), tokens, model.top_k);
      const uint64_t seed =
          stream_seed(experiment_.experiment.seed, SeedStream::Train, static_cast<uint64_t>(step),
                      static_cast<uint64_t>(micro), static_cast<uint64_t>(layer));
      const ReplayPairs pairs =
          replay_pairs(counts, tokens, model.top_k, experiment_.cluster.ranks, seed);
      ExpertPipeline& pipeline = *pipelines_[l];
      const auto forward = pipeline.plan_forward(pairs.experts, pairs.gates, pairs.home, tokens);
      pipeline.plan_backward(*forward,
                             replay_signals(pairs.gates.index_select(0, forward->computed), seed));
      if (routed[l].empty()) routed[l].assign(counts.size(), 0);
      for (std::size_t e = 0; e < counts.size(); ++e) routed[l][e] += counts[e];
    }
  }

  for (std::size_t l = 0; l < pipelines_.size(); ++l) {
    LayerStepStatistics statistics = pipelines_[l]->take_statistics();
    mark_unmeasured(statistics, experiment_.cluster.ranks);
    report.moe_modeled_seconds += statistics.modeled.total();
    report.layers.push_back(std::move(statistics));
    report.expert_load.push_back({model.first_k_dense + static_cast<int64_t>(l), routed[l]});
  }
  cumulative_modeled_ += report.moe_modeled_seconds;
  report.cumulative_moe_modeled_seconds = cumulative_modeled_;
  report.cumulative_step_seconds = report.cumulative_moe_seconds =
      report.cumulative_moe_critical_seconds = kNotMeasured;
  if (!pipelines_.empty()) {
    report.rank_memory =
        step_memory_peaks(pipelines_.front()->settings().costs.memory, report.layers,
                          StaticMemory{budget_.optimizer_bytes, budget_.dense_bytes});
  }
  return report;
}

}  // namespace lrmoe
