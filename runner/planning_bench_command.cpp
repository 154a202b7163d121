#include "runner/planning_bench_command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "core/pipeline/instance_table.hpp"
#include "core/replay/plan_replay.hpp"
#include "lrmoe/static_owners.hpp"
#include "runner/replay_command.hpp"
#include "runner/text_table.hpp"

namespace lrmoe {
namespace {

// One plan's figures for one pass of the first MoE layer.
struct PlanFigures {
  PlanCollectives plan;
  double pair_row_bytes = 0;  // sent by the busiest rank, all four all-to-alls
  double layer_seconds = 0;   // modeled, the whole pass
  double replay_seconds = 0;  // wall time of the replay on this machine
  std::string failed;
};

PlanFigures replay_one_pass(const PlanningBenchOptions& options, int64_t ranks, int64_t tokens,
                            const std::string& planning) {
  // Slots for each rank's owned experts and half as many again for replicas (at least one), as
  // the replay experiments have them; one sequence per rank.
  const std::vector<std::string> settings = {fmt::format("cluster.ranks={}", ranks),
                                             "cluster.slots_per_rank=0",
                                             fmt::format("train.batch_size={}", ranks),
                                             fmt::format("train.seq_len={}", tokens),
                                             "train.micro_batches=1",
                                             fmt::format("policies.planning={}", planning)};
  ReplayExperiment r = prepare_replay(options.source, settings,
                                      fmt::format("{} ranks, {} planning", ranks, planning));
  Experiment& e = r.experiment;
  const int64_t owned = owned_experts_per_rank(e.model.num_experts, ranks);
  e.cluster.slots_per_rank = owned + std::max<int64_t>(1, owned / 2);
  PlanFigures figures;
  const auto started = std::chrono::steady_clock::now();
  try {
    auto loads = std::make_shared<SkewedLoads>(parse_skew(options.skew), e.model.num_experts,
                                               e.experiment.seed);
    PlanReplay replay(e, r.policies, r.profile, loads, /*moe_layers=*/1);
    const StepReport report = replay.step(1);
    const LayerStepStatistics& layer = report.layers.front();
    figures.plan = layer.plan;
    figures.pair_row_bytes =
        static_cast<double>(*std::max_element(layer.bytes_sent.begin(), layer.bytes_sent.end()));
    figures.layer_seconds = layer.modeled.total();
  } catch (const PlanError& error) {
    figures.failed = error.what();
  }
  figures.replay_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return figures;
}

std::string kibibytes(double bytes) {
  return fmt::format("{:.1f}", bytes / 1024.0);
}
std::string milliseconds(double seconds) {
  return fmt::format("{:.3f}", seconds * 1e3);
}

}  // namespace

int planning_bench_command(const PlanningBenchOptions& options, std::ostream& out) {
  parse_skew(options.skew);
  for (const int64_t value : options.ranks)
    if (value < 1)
      throw std::invalid_argument(fmt::format("--ranks: {} is not a rank count", value));
  for (const int64_t value : options.tokens_per_rank)
    if (value < 1)
      throw std::invalid_argument(fmt::format("--tokens-per-rank: {} is not a token count", value));
  const ReplayExperiment first = prepare_replay(options.source, {}, "as given");
  const ModelConfig& model = first.experiment.model;
  out << fmt::format(
      "planning cost of {}: model {} (hidden {}, {} experts of FFN {}, top {}), first MoE layer, "
      "one pass, loads {} ; hardware profile {}; per rank, one rank per process; counted and "
      "modeled from the plans' sizes, not measured\n\n",
      experiment_place(options.source), model.preset, model.hidden_size, model.num_experts,
      model.expert_ffn_size, model.top_k, options.skew, first.profile.name);

  QueryResult table{{"tokens/rank", "ranks", "exact recv KiB", "scalable recv KiB",
                     "exact held KiB", "scalable held KiB", "pair rows KiB", "exact plan ms",
                     "scalable plan ms", "layer ms exact", "layer ms scalable", "replay s"},
                    {}};
  for (const int64_t tokens : options.tokens_per_rank) {
    for (const int64_t ranks : options.ranks) {
      const PlanFigures exact = replay_one_pass(options, ranks, tokens, "exact");
      const PlanFigures scalable = replay_one_pass(options, ranks, tokens, "scalable");
      if (!exact.failed.empty() || !scalable.failed.empty()) {
        out << fmt::format("{} tokens per rank on {} ranks: {}\n", tokens, ranks,
                           exact.failed.empty() ? scalable.failed : exact.failed);
        continue;
      }
      table.rows.push_back(
          {std::to_string(tokens), std::to_string(ranks), kibibytes(exact.plan.bytes_received),
           kibibytes(scalable.plan.bytes_received), kibibytes(exact.plan.bytes_held),
           kibibytes(scalable.plan.bytes_held), kibibytes(exact.pair_row_bytes),
           milliseconds(exact.plan.seconds), milliseconds(scalable.plan.seconds),
           milliseconds(exact.layer_seconds), milliseconds(scalable.layer_seconds),
           fmt::format("{:.1f}", exact.replay_seconds + scalable.replay_seconds)});
    }
  }
  out << render_text_table(table);
  out << "\nrecv: bytes the plan's collectives bring the busiest rank; held: the plan's gathered "
         "arrays (exact) or count matrices (scalable) per rank, beyond its own pairs; pair rows: "
         "bytes of pair rows the busiest rank sends (the same under both plans); plan ms: the "
         "plan's collectives, modeled; layer ms: the whole pass, modeled\n";
  return 0;
}

}  // namespace lrmoe
