// The scalable plan's forward and backward planners (Note [Scalable planning] in docs/notes.md):
// each process plans from its own pairs and from counts summed over the processes. The exact
// planners are in expert_pipeline_exact.cpp, what both share in expert_pipeline.cpp.

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "core/pipeline/context_move.hpp"
#include "core/pipeline/count_layout.hpp"
#include "core/pipeline/expert_counts.hpp"
#include "core/pipeline/expert_pipeline.hpp"
#include "core/pipeline/forward_drop_scores.hpp"
#include "core/pipeline/plan_budget.hpp"
#include "core/pipeline/plugin_output_checks.hpp"
#include "core/pipeline/quota_threshold_search.hpp"
#include "core/pipeline/stable_order.hpp"
#include "core/pipeline/stopwatch.hpp"
#include "core/pipeline/summed_counts.hpp"
#include "core/plugins/plugin_boundary.hpp"

namespace lrmoe {
namespace {

// [ranks * experts] pairs per (home rank, expert) from `routed` [ranks * instances] pairs per
// (home rank, instance).
std::vector<int64_t> groups_by_expert(const std::vector<int64_t>& routed,
                                      const InstanceTable& table, int64_t ranks,
                                      int64_t num_experts) {
  const auto instances = static_cast<int64_t>(table.size());
  std::vector<int64_t> groups(static_cast<std::size_t>(ranks * num_experts), 0);
  for (int64_t h = 0; h < ranks; ++h)
    for (int64_t i = 0; i < instances; ++i)
      groups[static_cast<std::size_t>(h * num_experts +
                                      table.instances[static_cast<std::size_t>(i)].expert)] +=
          routed[static_cast<std::size_t>(h * instances + i)];
  return groups;
}

}  // namespace

std::shared_ptr<const ForwardPass> ExpertPipeline::plan_forward_from_counts(
    const torch::Tensor& experts, const torch::Tensor& gates, const torch::Tensor& home,
    int64_t tokens) {
  Stopwatch clock(settings_.plan_clock);
  PipelineOverhead overhead;
  const int64_t E = settings_.num_experts, R = settings_.ranks;
  // Routed pairs per (home rank, expert) over every process: each home rank is one process's.
  std::vector<int64_t> routed_groups =
      summed_over_processes(*collectives_, pair_order_group_counts(home, R, experts, E));
  std::vector<int64_t> counts(static_cast<std::size_t>(E), 0);
  auto pass = std::make_shared<ForwardPass>();
  pass->routed_per_home_rank.assign(static_cast<std::size_t>(R), 0);
  for (int64_t h = 0; h < R; ++h) {
    for (int64_t e = 0; e < E; ++e) {
      const int64_t pairs = routed_groups[static_cast<std::size_t>(h * E + e)];
      counts[static_cast<std::size_t>(e)] += pairs;
      pass->routed_per_home_rank[static_cast<std::size_t>(h)] += pairs;
    }
  }
  overhead.compaction += clock.lap();
  const PlacementPlan plan = place(*pass, counts, tokens, experts.device());
  const InstanceTable* table = pass->table.get();
  overhead.placement += clock.lap();

  // Forward capacity drops: each expert's highest drop scores (gates or random draws) over every
  // process, found by a threshold search, the same pairs as the exact plan's (Note [Scalable
  // selection]).
  pass->routed_per_expert = counts;
  pass->computed_counts = counts;
  for (std::size_t e = 0; e < counts.size() && !plan.forward_capacity.empty(); ++e)
    pass->computed_counts[e] = std::min(counts[e], plan.forward_capacity[e]);
  // This process's pair ids: their places in pair order over every process (Note [Pair order]);
  // on one process its own order, a view of the thread's count (read-only, as every identity
  // order is), where allocating them was 3% of LRMoE's plan in a profile.
  const torch::Tensor ids =
      settings_.process.processes == 1
          ? identity_order(experts.numel(), experts.options())
          : pair_order_ids(routed_groups, E, settings_.process, experts.device());
  std::vector<int64_t> computed_groups;
  if (pass->computed_counts != counts) {
    KeptOverProcesses computed =
        kept_over_processes(*collectives_, home_group_offsets(routed_groups, E, settings_.process),
                            forward_drop_scores(plan.forward_drop, gates, ids, pass_seed(step_)),
                            pass->computed_counts, counts, settings_.process);
    pass->computed = std::move(computed.kept);
    computed_groups = std::move(computed.groups);
    pass->search_rounds = std::move(computed.rounds);
  } else {
    pass->computed = identity_order(experts.numel(), experts.options());
    computed_groups = std::move(routed_groups);
  }
  // This process's computed pairs by (expert, home rank here), and by expert: every
  // ranks_per_process-th of those offsets.
  const ProcessView& process = settings_.process;
  pass->home_group_offsets = home_group_offsets(computed_groups, E, process);
  // Every pair computed: the pairs as they are, no copies. Else the computed pairs' experts and
  // home ranks follow from their groups, which pair order lays end to end.
  if (pass->computed.numel() != experts.numel()) {
    PairLabels labels = pair_order_labels(pass->home_group_offsets, process.ranks_per_process,
                                          process.first_rank(), experts.device());
    if (labels.experts.numel() != pass->computed.numel())
      throw PlanError(fmt::format(
          "the scalable forward: process {} computes {} pairs, its computed groups count {}",
          process.index, pass->computed.numel(), labels.experts.numel()));
    pass->experts = std::move(labels.experts);
    pass->home = std::move(labels.home);
  } else {
    pass->experts = experts;
    pass->home = home;
  }
  pass->pair_ids =
      pass->computed.numel() == experts.numel() ? ids : ids.index_select(0, pass->computed);
  for (int64_t e = 0; e <= E; ++e)
    pass->expert_offsets.push_back(
        pass->home_group_offsets[static_cast<std::size_t>(e * process.ranks_per_process)]);
  const std::vector<double> expected_backward =
      check_as_planned(*table, pass->computed_counts, plan.quota);
  overhead.compaction += clock.lap();

  const std::vector<double> no_load(static_cast<std::size_t>(R), 0.0);
  std::vector<int64_t> routed_counts =
      route_counts(Phase::Forward, std::move(computed_groups), pass->table,
                   room(rank_holdings(*table, no_load, expected_backward), forward_pairs_that_fit));
  overhead.routing += clock.lap();
  pass->layout =
      count_pair_layout(std::move(routed_counts), pass->experts.numel(), experts.device(), *table,
                        R, process, settings_.exchange_chunks > 1);
  pass->local_pairs = pass->computed;  // every computed pair here is homed here
  check_budget(rank_holdings(*table, as_loads(pass->layout.load), expected_backward),
               "after forward routing");
  split_in_chunks(*pass);
  overhead.compaction += clock.lap();

  const int64_t routed = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  statistics_.pairs_routed += routed;
  statistics_.pairs_dropped += routed - std::accumulate(pass->computed_counts.begin(),
                                                        pass->computed_counts.end(), int64_t{0});
  statistics_.replicas = table->replicas();
  statistics_.placement = table->instances;
  statistics_.overhead += overhead;
  statistics_.planning_seconds[kForwardPhase] += overhead.total();
  return pass;
}

BackwardPass ExpertPipeline::plan_backward_from_counts(const ForwardPass& forward,
                                                       PairBatch signals,
                                                       PipelineOverhead& overhead) {
  Stopwatch clock(settings_.plan_clock);
  const int64_t E = settings_.num_experts, R = settings_.ranks;
  const ProcessView& process = settings_.process;
  const InstanceTable& table = *forward.table;
  const torch::Device device = forward.experts.device();
  // The metric scores this process's computed pairs (Note [Scalable planning]).
  const torch::Tensor scores = score(forward, signals);
  const std::vector<int64_t> quota = backward_quota(forward, scores);
  overhead.metric += clock.lap();

  // Each expert keeps the selection's count of its highest-scored pairs over every process.
  const RankedSelectionPolicy& ranked = *policies_->ranked_selection;
  const std::string& selection_name = policy_name(PolicyKind::Selection);
  std::vector<int64_t> keep(static_cast<std::size_t>(E));
  std::vector<float> weight(static_cast<std::size_t>(E), 1.0F);
  bool weighted = false, searched = false;
  BackwardPass pass;
  // One plugin call scope for every expert's count, one for their weights: a scope per expert
  // was a tenth of a small layer's plan in profiles.
  call_policy(PolicyKind::Selection, "kept_count", [&] {
    for (std::size_t x = 0; x < keep.size(); ++x)
      keep[x] = ranked.kept_count(forward.computed_counts[x], quota[x]);
  });
  for (int64_t e = 0; e < E; ++e) {
    const auto x = static_cast<std::size_t>(e);
    check_kept_count(keep[x], forward.computed_counts[x], quota[x], e,
                     settings_.check_plugin_outputs, selection_name);
    searched = searched || keep[x] != forward.computed_counts[x];
  }
  call_policy(PolicyKind::Selection, "kept_weight", [&] {
    for (std::size_t x = 0; x < keep.size(); ++x)
      if (keep[x] > 0) weight[x] = ranked.kept_weight(forward.computed_counts[x], keep[x]);
  });
  for (int64_t e = 0; e < E; ++e) {
    const auto x = static_cast<std::size_t>(e);
    if (keep[x] == 0) continue;
    check_kept_weight(weight[x], e, selection_name);
    weighted = weighted || weight[x] != 1.0F;
  }
  std::vector<int64_t> kept_groups;  // kept pairs per (home rank, expert), over every process
  if (searched) {
    KeptOverProcesses kept = kept_over_processes(*collectives_, forward.home_group_offsets, scores,
                                                 keep, forward.computed_counts, process);
    pass.kept = std::move(kept.kept);
    kept_groups = std::move(kept.groups);
    pass.search_rounds = std::move(kept.rounds);
  } else {
    pass.kept = identity_order(forward.experts.numel(), forward.experts.options());
    kept_groups = groups_by_expert(forward.layout.home_instance, table, R, E);
  }
  // Among the computed pairs, the kept ones' rows (every pair kept: the rows as they are).
  auto kept_rows = [&](const torch::Tensor& rows) {
    return searched ? take_rows(rows, pass.kept) : rows;
  };
  if (weighted)
    pass.local_weights = torch::tensor(weight, torch::kFloat32)
                             .to(device)
                             .index_select(0, kept_rows(forward.experts));
  overhead.selection += clock.lap();

  const std::vector<double> forward_load = as_loads(forward.layout.load);
  const std::vector<double> no_load(static_cast<std::size_t>(R), 0.0);
  std::vector<int64_t> routed =
      route_counts(Phase::Backward, std::move(kept_groups), forward.table,
                   room(rank_holdings(table, forward_load, no_load), backward_pairs_that_fit));
  overhead.routing += clock.lap();
  // Every pair kept and routed as in the forward: each keeps its forward instance (the layout
  // follows from the counts and the pairs, which are the forward's), so nothing moves with it
  // (Note [Context in place]). Every process knows both counts, so all take the same branch.
  pass.context_in_place = !searched && routed == forward.layout.home_instance;
  const bool chunked = settings_.exchange_chunks > 1;
  // Not a conditional expression: with the forward's layout, a const lvalue, on one side, its
  // value is const, and a new layout would be copied rather than moved in.
  if (pass.context_in_place)
    pass.layout = forward.layout;
  else
    pass.layout =
        count_pair_layout(std::move(routed), pass.kept.numel(), device, table, R, process, chunked);
  // The kept pairs are positions among the forward's home rows, which are this process's
  // computed pairs in pair order.
  pass.local_kept = pass.kept;
  torch::Tensor context_instance;
  if (!settings_.recompute && pass.context_in_place) {
    // Each rank's rows stay on it: forward to backward rank is the layout's loads on the
    // diagonal, to each backward instance its rows. Home to forward rank would be the layout's
    // matrix; no index message reads it.
    const int64_t I = table.size();
    if (chunked) {
      pass.forward_instance.assign(static_cast<std::size_t>(R * I), 0);
      for (int64_t i = 0; i < I; ++i)
        pass.forward_instance[static_cast<std::size_t>(table.instance_rank[i] * I + i)] =
            pass.layout.instance_offsets[static_cast<std::size_t>(i + 1)] -
            pass.layout.instance_offsets[static_cast<std::size_t>(i)];
    }
    pass.by_forward_rank.assign(static_cast<std::size_t>(R * R), 0);
    for (int64_t r = 0; r < R; ++r)
      pass.by_forward_rank[static_cast<std::size_t>(r * R + r)] =
          pass.layout.load[static_cast<std::size_t>(r)];
    ContextMove move = context_in_place(pass.layout, pass.by_forward_rank, table, process,
                                        /*with_instances=*/chunked);
    pass.context = std::move(move.slice);
    pass.context_rows = std::move(move.rows);
    context_instance = std::move(move.instance);
  } else if (!settings_.recompute) {
    // Kept pairs per (home rank, forward rank) and per (forward rank, backward rank), summed in
    // one all-reduce: the context move's counts (Note [Scalable planning]). Chunked, per
    // (forward rank, backward instance), which the chunks' moves need, summed by rank after.
    ContextSources sources =
        context_sources(forward.layout, pass.kept, pass.layout, table, process, chunked);
    std::vector<std::vector<int64_t>> counts(2);
    counts[0] = std::move(sources.home_forward);
    counts[1] = std::move(sources.forward_backward);
    counts = summed_over_processes(*collectives_, std::move(counts));
    pass.home_forward = std::move(counts[0]);
    if (chunked) {
      pass.forward_instance = std::move(counts[1]);
      pass.by_forward_rank = rank_matrix(pass.forward_instance, table, R);
    } else {
      pass.by_forward_rank = std::move(counts[1]);
    }
    ContextMove move =
        context_move(*collectives_, sources, pass.layout, pass.by_forward_rank, pass.home_forward,
                     forward.layout.local.first_row, table, process, device,
                     /*with_instances=*/chunked);
    pass.context = std::move(move.slice);
    pass.context_rows = std::move(move.rows);
    context_instance = std::move(move.instance);
  }
  split_in_chunks(forward, pass, context_instance);
  overhead.compaction += clock.lap();
  return pass;
}

}  // namespace lrmoe
