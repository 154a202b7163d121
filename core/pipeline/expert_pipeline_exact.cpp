// The exact plan's forward and backward planners (Note [Exact multi-process plan] in
// docs/notes.md): every process gathers every pair and plans all of them, the same plan on each.
// The scalable planners are in expert_pipeline_from_counts.cpp, what both share in
// expert_pipeline.cpp.

#include <algorithm>

#include "core/pipeline/expert_counts.hpp"
#include "core/pipeline/expert_pipeline.hpp"
#include "core/pipeline/forward_drop_scores.hpp"
#include "core/pipeline/global_pairs.hpp"
#include "core/pipeline/plan_budget.hpp"
#include "core/pipeline/plugin_output_checks.hpp"
#include "core/pipeline/stable_order.hpp"
#include "core/pipeline/stopwatch.hpp"
#include "core/plugins/plugin_boundary.hpp"

namespace lrmoe {

std::shared_ptr<const ForwardPass> ExpertPipeline::plan_forward_exact(const torch::Tensor& experts,
                                                                      const torch::Tensor& gates,
                                                                      const torch::Tensor& home,
                                                                      int64_t tokens) {
  Stopwatch clock(settings_.plan_clock);
  PipelineOverhead overhead;
  const GlobalPairs all = gather_pairs(*collectives_, experts, gates, home);
  overhead.compaction += clock.lap();
  const std::vector<int64_t> counts = expert_counts(all.experts, settings_.num_experts);
  overhead.compaction += clock.lap();
  auto pass = std::make_shared<ForwardPass>();
  const PlacementPlan plan = place(*pass, counts, tokens, experts.device());
  const InstanceTable* table = pass->table.get();
  overhead.placement += clock.lap();

  // Forward capacity drops, then the computed pairs in expert order (Note [Pair order]): each
  // expert computes the pairs with its highest drop scores (its gates, or random draws), ties to
  // the earlier pair.
  pass->routed_per_expert = counts;
  pass->computed_counts = counts;
  if (plan.forward_capacity.empty()) {
    pass->computed = identity_order(all.experts.numel(), all.experts.options());
  } else {
    const torch::Tensor scores =
        forward_drop_scores(plan.forward_drop, all.gates, all.pair_ids, pass_seed(step_));
    pass->computed = highest_scored_per_expert(scores, all.experts, offsets_from_counts(counts),
                                               plan.forward_capacity);
    for (std::size_t e = 0; e < counts.size(); ++e)
      pass->computed_counts[e] = std::min(counts[e], plan.forward_capacity[e]);
  }
  pass->experts = all.experts.index_select(0, pass->computed);
  pass->expert_offsets = offsets_from_counts(pass->computed_counts);
  pass->home = all.home.index_select(0, pass->computed);
  pass->pair_ids = all.pair_ids.index_select(0, pass->computed);
  const std::vector<double> expected_backward =
      check_as_planned(*table, pass->computed_counts, plan.quota);
  overhead.compaction += clock.lap();

  const std::vector<double> no_load(static_cast<std::size_t>(settings_.ranks), 0.0);
  const torch::Tensor instance =
      route(Phase::Forward, pass->experts, pass->home, *table,
            room(rank_holdings(*table, no_load, expected_backward), forward_pairs_that_fit));
  overhead.routing += clock.lap();
  // The routed pairs (dropped ones too) per home rank ride along in the layout's one copy.
  std::vector<std::vector<int64_t>> routed;
  pass->layout = build_pair_layout(instance, pass->home, *table, settings_.ranks, settings_.process,
                                   {{all.home, settings_.ranks}}, &routed);
  pass->routed_per_home_rank = std::move(routed.front());
  pass->local_pairs =
      all.source_row.index_select(0, pass->computed.index_select(0, pass->layout.local.home_pairs));
  check_budget(rank_holdings(*table, as_loads(pass->layout.load), expected_backward),
               "after forward routing");
  split_in_chunks(*pass);
  overhead.compaction += clock.lap();

  statistics_.pairs_routed += all.experts.numel();
  statistics_.pairs_dropped += all.experts.numel() - pass->computed.numel();
  statistics_.replicas = table->replicas();
  statistics_.placement = table->instances;
  statistics_.overhead += overhead;
  statistics_.planning_seconds[kForwardPhase] += overhead.total();
  return pass;
}

BackwardPass ExpertPipeline::plan_backward_exact(const ForwardPass& forward, PairBatch signals,
                                                 PipelineOverhead& overhead) {
  Stopwatch clock(settings_.plan_clock);
  signals = gather_signals(forward, std::move(signals));
  overhead.compaction += clock.lap();
  const torch::Tensor scores = score(forward, signals);
  signals.quota = backward_quota(forward, scores);
  overhead.metric += clock.lap();
  Selection selection = call_policy(PolicyKind::Selection, "select", [&] {
    return policies_->selection->select(for_policy(PolicyKind::Selection, signals),
                                        for_policy(PolicyKind::Selection, scores));
  });
  overhead.selection += clock.lap();
  check_selection(selection, forward.experts, signals.quota, settings_.check_plugin_outputs,
                  policy_name(PolicyKind::Selection));

  const torch::Device device = forward.experts.device();
  BackwardPass pass;
  pass.kept = selection.kept.to(device);
  const torch::Tensor kept_experts = forward.experts.index_select(0, pass.kept);
  const torch::Tensor kept_home = forward.home.index_select(0, pass.kept);
  const InstanceTable& table = *forward.table;
  const std::vector<double> forward_load = as_loads(forward.layout.load);
  const std::vector<double> no_load(static_cast<std::size_t>(settings_.ranks), 0.0);
  overhead.compaction += clock.lap();

  const torch::Tensor instance =
      route(Phase::Backward, kept_experts, kept_home, table,
            room(rank_holdings(table, forward_load, no_load), backward_pairs_that_fit));
  overhead.routing += clock.lap();
  // Without recomputation: each kept pair's forward rank, and (riding in the layout's copy) the
  // kept pairs per (forward rank, backward instance), summed by the instances' ranks: what moves
  // with their saved pre-activations.
  torch::Tensor forward_rank;
  std::vector<CountRequest> riders;
  const int64_t R = settings_.ranks, I = table.size();
  if (!settings_.recompute) {
    forward_rank = table.instance_rank_tensor.index_select(
        0, forward.layout.instance.index_select(0, pass.kept));
    riders.push_back({forward_rank, R, instance, I});
  }
  std::vector<std::vector<int64_t>> moved;
  pass.layout = build_pair_layout(instance, kept_home, table, R, settings_.process, riders, &moved);
  if (!settings_.recompute) {
    pass.forward_instance = std::move(moved.front());
    pass.by_forward_rank = rank_matrix(pass.forward_instance, table, R);
  }
  localize(forward, forward_rank, selection.weights, pass);
  // The exact context move's home rows are the kept pairs (Note [Gradients of dropped pairs]).
  split_in_chunks(forward, pass, settings_.recompute ? torch::Tensor() : pass.layout.instance);
  overhead.compaction += clock.lap();
  return pass;
}

PairBatch ExpertPipeline::gather_signals(const ForwardPass& forward, PairBatch local) const {
  if (collectives_->single()) return local;
  const ProcessView& process = settings_.process;
  const torch::Tensor home_process = process.process_of(forward.home);
  // The computed pairs each process homes, from the forward layout's counts.
  const std::vector<int64_t> by_rank = forward.layout.sent_by_rank();
  std::vector<int64_t> by_process(static_cast<std::size_t>(process.processes), 0);
  for (std::size_t r = 0; r < by_rank.size(); ++r)
    by_process[static_cast<std::size_t>(process.process_of(static_cast<int64_t>(r)))] += by_rank[r];
  const torch::Tensor all = gather_in_pair_order(
      *collectives_,
      torch::stack({local.gates, local.upstream_norm, local.input_norm, local.hidden_norm}, 1),
      home_process, by_process);
  local.gates = all.select(1, 0);
  local.upstream_norm = all.select(1, 1);
  local.input_norm = all.select(1, 2);
  local.hidden_norm = all.select(1, 3);
  return local;
}

void ExpertPipeline::localize(const ForwardPass& forward, const torch::Tensor& forward_rank,
                              const torch::Tensor& weights, BackwardPass& pass) const {
  const torch::Tensor& kept_here = pass.layout.local.home_pairs;  // indices into pass.kept
  // Position of each computed pair among the forward's home rows (valid for those homed here).
  const torch::Tensor& forward_home = forward.layout.local.home_pairs;
  const torch::Tensor home_row =
      torch::full({forward.home.numel()}, -1, forward_home.options())
          .index_copy_(0, forward_home,
                       identity_order(forward_home.numel(), forward_home.options()));
  pass.local_kept = home_row.index_select(0, pass.kept.index_select(0, kept_here));
  if (weights.defined()) {
    pass.local_weights = weights.to(kept_here.device(), torch::kFloat32).index_select(0, kept_here);
  }
  if (settings_.recompute) return;

  pass.context = process_slice(pass.layout.order, pass.layout.instance, forward_rank,
                               pass.layout.instance_offsets, pass.by_forward_rank, *forward.table,
                               settings_.process);
  const torch::Tensor& forward_order = forward.layout.order;
  const torch::Tensor destination_row =
      torch::empty_like(forward_order)
          .index_copy_(0, forward_order,
                       identity_order(forward_order.numel(), forward_order.options()));
  pass.context_rows =
      destination_row.index_select(0, pass.kept.index_select(0, pass.context.home_pairs)) -
      forward.layout.local.first_row;
}

}  // namespace lrmoe
