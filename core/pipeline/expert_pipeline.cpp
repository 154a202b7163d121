#include "core/pipeline/expert_pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/pipeline/expert_counts.hpp"
#include "core/pipeline/global_pairs.hpp"
#include "core/pipeline/pass_accounting.hpp"
#include "core/pipeline/plan_budget.hpp"
#include "core/pipeline/plugin_output_checks.hpp"
#include "core/pipeline/stable_order.hpp"
#include "core/pipeline/stopwatch.hpp"
#include "core/plugins/plugin_boundary.hpp"
#include "lrmoe/counter_random.hpp"
#include "lrmoe/expert_segments.hpp"

namespace lrmoe {
namespace {

// Counts of earlier passes a placement can see; SYMI needs one, smoothing planners a few.
constexpr std::size_t kHistoryLength = 16;

uint64_t mix_seed(uint64_t seed, int64_t step, int64_t layer, int64_t pass) {
  // splitmix64 over the fields: different streams per step, layer and micro-batch.
  return mix64(seed ^ (static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(layer) * 0xBF58476D1CE4E5B9ull) ^
               (static_cast<uint64_t>(pass) * 0x94D049BB133111EBull));
}

}  // namespace

ExpertPipeline::ExpertPipeline(std::shared_ptr<const PolicySet> policies, PipelineSettings settings,
                               std::shared_ptr<Collectives> collectives)
    : policies_(std::move(policies)),
      settings_(std::move(settings)),
      collectives_(std::move(collectives)),
      exchange_(std::make_shared<PairExchange>(collectives_)) {
  settings_.process.ranks_per_process = settings_.ranks / settings_.process.processes;
  statistics_.layer = settings_.layer;
}

const std::string& ExpertPipeline::policy_name(PolicyKind kind) const {
  return policies_->records.at(static_cast<std::size_t>(kind)).name;
}

torch::Tensor ExpertPipeline::route(Phase phase, const torch::Tensor& experts,
                                    const torch::Tensor& home, const InstanceTable& table,
                                    std::vector<int64_t> capacity) {
  RoutingRequest request;
  request.phase = phase;
  request.step = step_;
  request.layer = settings_.layer;
  request.ranks = settings_.ranks;
  request.experts = for_policy(PolicyKind::Routing, experts);
  request.home_ranks = for_policy(PolicyKind::Routing, home);
  request.instances = table.instances;
  table.copy_instance_lists(request.expert_instances);
  request.capacity = std::move(capacity);
  torch::Tensor instance =
      call_policy(PolicyKind::Routing, "route", [&] { return policies_->routing->route(request); });
  return checked_routing(instance, experts, table, policy_name(PolicyKind::Routing));
}

std::vector<int64_t> ExpertPipeline::route_counts(Phase phase, std::vector<int64_t> groups,
                                                  const std::shared_ptr<const InstanceTable>& table,
                                                  std::vector<int64_t> capacity) {
  CountRoutingRequest& request = count_request_;
  request.phase = phase;
  request.step = step_;
  request.layer = settings_.layer;
  request.ranks = settings_.ranks;
  request.num_experts = settings_.num_experts;
  request.pairs = std::move(groups);
  // A table alive is the one the request was filled from (weak_ptr: never a new table at the
  // freed one's address).
  if (count_request_table_.lock() != table) {
    request.instances = table->instances;
    table->copy_instance_lists(request.expert_instances);
    count_request_table_ = table;
  }
  request.capacity = std::move(capacity);
  std::vector<int64_t> routed = call_policy(PolicyKind::Routing, "route_counts", [&] {
    return policies_->count_routing->route_counts(request);
  });
  check_count_routing(routed, request.pairs, settings_.ranks, *table,
                      policy_name(PolicyKind::Routing));
  request.pairs = {};  // the counts are the pass's: not held between passes
  return routed;
}

torch::Tensor ExpertPipeline::for_policy(PolicyKind kind, const torch::Tensor& tensor) const {
  const bool host =
      policies_->records.at(static_cast<std::size_t>(kind)).inputs == TensorPlace::Host;
  return host && tensor.defined() ? tensor.to(torch::kCPU) : tensor;
}

PairBatch ExpertPipeline::for_policy(PolicyKind kind, PairBatch pairs) const {
  for (torch::Tensor* tensor : {&pairs.experts, &pairs.pair_ids, &pairs.gates, &pairs.upstream_norm,
                                &pairs.input_norm, &pairs.hidden_norm}) {
    *tensor = for_policy(kind, *tensor);
  }
  return pairs;
}

std::string ExpertPipeline::plan_name() const {
  return fmt::format("step {}, MoE layer {}: the plan of placement '{}'", step_, settings_.layer,
                     policy_name(PolicyKind::Placement));
}

std::vector<int64_t> ExpertPipeline::room(const std::vector<LayerHolding>& holdings,
                                          int64_t (*pairs_that_fit)(const MemoryCosts&,
                                                                    LayerHolding, int64_t)) const {
  return rank_room(holdings, settings_.costs.memory, settings_.budget_bytes, pairs_that_fit);
}

void ExpertPipeline::check_budget(const std::vector<LayerHolding>& holdings,
                                  const std::string& stage) const {
  check_plan_fits(holdings, settings_.costs.memory, settings_.budget_bytes, plan_name(), stage);
}

std::pair<PlacementPlan, std::shared_ptr<InstanceTable>> ExpertPipeline::plan_placement(
    const std::vector<int64_t>& counts, int64_t tokens, const torch::Device& device) {
  PlacementRequest request;
  request.step = step_;
  request.layer = settings_.layer;
  request.num_experts = settings_.num_experts;
  request.ranks = settings_.ranks;
  request.slots_per_rank = settings_.slots_per_rank;
  request.top_k = settings_.top_k;
  request.tokens = tokens * settings_.process.processes;  // equal shards
  request.counts = counts;
  request.history.assign(history_.begin(), history_.end());
  request.budget_bytes = settings_.budget_bytes;
  request.memory = settings_.costs.memory;
  PlacementPlan plan = call_policy(PolicyKind::Placement, "plan",
                                   [&] { return policies_->placement->plan(request); });
  auto table = std::make_shared<InstanceTable>(
      build_instance_table(plan, settings_.num_experts, settings_.ranks, settings_.slots_per_rank,
                           policy_name(PolicyKind::Placement)));
  // Only the exact plan routes and lays out pairs by the table's tensors.
  if (settings_.planning == Planning::Exact) table->place_on(device);
  return {std::move(plan), std::move(table)};
}

bool ExpertPipeline::places_ahead() const {
  return settings_.overlap_expert_fetch &&
         policies_->placement->plans_from() != PlanInformation::ThisPass;
}

std::shared_ptr<const InstanceTable> ExpertPipeline::place_ahead(int64_t tokens,
                                                                 const torch::Device& device,
                                                                 double cover_seconds) {
  const int64_t started = host_clock_ns();
  Stopwatch clock(settings_.plan_clock);
  try {
    auto [plan, table] = plan_placement({}, tokens, device);
    if (plan.information == PlanInformation::ThisPass) {
      throw PlanError(fmt::format(
          "placement '{}' declares that it plans without this pass's counts (plans_from), but its "
          "plan says it used them (information = ThisPass); make the two agree",
          policy_name(PolicyKind::Placement)));
    }
    ahead_ = PlacedAhead{std::move(plan), std::move(table), cover_seconds};
  } catch (const PlanError& error) {
    throw located(error, "forward, placed ahead");
  }
  // The plan's time by part counts it; the critical path does not charge it to this layer's
  // ranks (planning_seconds), since it ran inside the previous layer's forward, whose measured
  // time holds it already.
  statistics_.overhead.placement += clock.lap();
  statistics_.plan_spans[kForwardPhase].push_back(
      {started, 1e-9 * static_cast<double>(host_clock_ns() - started)});
  return ahead_->table;
}

PlacementPlan ExpertPipeline::place(ForwardPass& pass, const std::vector<int64_t>& counts,
                                    int64_t tokens, const torch::Device& device) {
  auto [plan, table] = ahead_ ? std::pair{std::move(ahead_->plan), std::move(ahead_->table)}
                              : plan_placement(counts, tokens, device);
  if (ahead_) {
    pass.fetch_cover_seconds = ahead_->cover_seconds;
    statistics_.placed_ahead = true;
  }
  ahead_.reset();
  history_.push_back(counts);
  if (history_.size() > kHistoryLength) history_.pop_front();
  // A quota above the count keeps the same pairs (kKeepEveryPair among them): what the selection
  // and the records see is the number kept at most.
  for (std::size_t e = 0; e < plan.quota.size(); ++e)
    plan.quota[e] = std::min(plan.quota[e], counts[e]);
  statistics_.forward_capacity = statistics_.forward_capacity || !plan.forward_capacity.empty();
  pass.step = step_;
  pass.table = table;
  pass.quota = plan.quota;
  // A step with any warm-up pass is a warm-up step.
  if (statistics_.information != PlanInformation::WarmUp)
    statistics_.information = plan.information;
  return plan;
}

std::vector<double> ExpertPipeline::check_as_planned(const InstanceTable& table,
                                                     const std::vector<int64_t>& computed,
                                                     const std::vector<int64_t>& quota) const {
  // The plan as the memory model sees it before routing: loads split evenly over instances.
  std::vector<int64_t> kept_pairs(computed.size());
  for (std::size_t e = 0; e < kept_pairs.size(); ++e)
    kept_pairs[e] = std::min(computed[e], quota[e]);
  const std::vector<double> expected_forward = even_split(table, computed, settings_.ranks);
  std::vector<double> expected_backward = even_split(table, kept_pairs, settings_.ranks);
  check_budget(rank_holdings(table, expected_forward, expected_backward), "as planned");
  return expected_backward;
}

PlanError ExpertPipeline::located(const PlanError& error, const char* phase) const {
  std::string what = error.what();
  if (what.rfind("step ", 0) == 0) return error;  // placed already (the plan's budget checks)
  // A check of a plugin's answer names the plugin ("metric 'gate' returned ..."): the library
  // it came from goes with it.
  for (const PluginRecord& record : policies_->records) {
    const std::string plugin = fmt::format("{} '{}'", record.kind, record.name);
    if (what.rfind(plugin, 0) == 0 && !record.path.empty())
      what.insert(plugin.size(), fmt::format(" ({})", record.path));
  }
  return PlanError(
      fmt::format("step {}, MoE layer {}, {}: {}", step_, settings_.layer, phase, what));
}

std::shared_ptr<const ForwardPass> ExpertPipeline::plan_forward(const torch::Tensor& experts,
                                                                const torch::Tensor& gates,
                                                                const torch::Tensor& home,
                                                                int64_t tokens) {
  const int64_t started = host_clock_ns();
  try {
    auto pass = settings_.planning == Planning::Scalable
                    ? plan_forward_from_counts(experts, gates, home, tokens)
                    : plan_forward_exact(experts, gates, home, tokens);
    statistics_.plan_spans[kForwardPhase].push_back(
        {started, 1e-9 * static_cast<double>(host_clock_ns() - started)});
    return pass;
  } catch (const PlanError& error) {
    throw located(error, "forward");
  }
}

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
  // expert computes the pairs with its highest gates, ties to the earlier pair.
  pass->routed_per_expert = counts;
  pass->computed_counts = counts;
  if (plan.forward_capacity.empty()) {
    pass->computed = identity_order(all.experts.numel(), all.experts.options());
  } else {
    pass->computed = highest_scored_per_expert(all.gates, all.experts, offsets_from_counts(counts),
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

torch::Tensor ExpertPipeline::score(const ForwardPass& forward, PairBatch& signals) {
  signals.step = forward.step;
  signals.layer = settings_.layer;
  // The pass index is a global count, so every process draws the same seed (Note [Exact
  // multi-process plan]).
  signals.seed = mix_seed(settings_.seed, forward.step, settings_.layer, statistics_.pairs_routed);
  signals.experts = forward.experts;
  signals.pair_ids = forward.pair_ids;
  signals.expert_offsets = forward.expert_offsets;
  signals.quota = forward.quota;
  const torch::Tensor scores =
      call_policy(PolicyKind::Metric, "score", [&] {
        return policies_->metric->score(for_policy(PolicyKind::Metric, signals));
      }).to(forward.experts.device());
  check_scores(scores, forward.experts.numel(), settings_.check_plugin_outputs,
               policy_name(PolicyKind::Metric),
               {{"gates", signals.gates},
                {"upstream gradient norms", signals.upstream_norm},
                {"input norms", signals.input_norm},
                {"hidden norms", signals.hidden_norm}});
  return scores;
}

BackwardPass ExpertPipeline::plan_backward(const ForwardPass& forward, PairBatch signals) {
  const int64_t started = host_clock_ns();
  PipelineOverhead overhead;
  BackwardPass pass;
  try {
    pass = settings_.planning == Planning::Scalable
               ? plan_backward_from_counts(forward, std::move(signals), overhead)
               : plan_backward_exact(forward, std::move(signals), overhead);
  } catch (const PlanError& error) {
    throw located(error, "backward");
  }
  Stopwatch clock(settings_.plan_clock);
  check_budget(
      rank_holdings(*forward.table, as_loads(forward.layout.load), as_loads(pass.layout.load)),
      "after backward routing");
  overhead.compaction += clock.lap();
  statistics_.overhead += overhead;
  statistics_.planning_seconds[kBackwardPhase] += overhead.total();
  account(forward, pass);
  statistics_.plan_spans[kBackwardPhase].push_back(
      {started, 1e-9 * static_cast<double>(host_clock_ns() - started)});
  return pass;
}

BackwardPass ExpertPipeline::plan_backward_exact(const ForwardPass& forward, PairBatch signals,
                                                 PipelineOverhead& overhead) {
  Stopwatch clock(settings_.plan_clock);
  signals = gather_signals(forward, std::move(signals));
  overhead.compaction += clock.lap();
  const torch::Tensor scores = score(forward, signals);
  overhead.metric += clock.lap();
  Selection selection = call_policy(PolicyKind::Selection, "select", [&] {
    return policies_->selection->select(for_policy(PolicyKind::Selection, signals),
                                        for_policy(PolicyKind::Selection, scores));
  });
  overhead.selection += clock.lap();
  check_selection(selection, forward.experts, forward.quota, settings_.check_plugin_outputs,
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

void ExpertPipeline::split_in_chunks(ForwardPass& forward) const {
  if (settings_.exchange_chunks == 1) return;
  forward.instance_chunk =
      instance_chunks(*forward.table, forward.layout.instance_offsets, settings_.exchange_chunks);
  forward.chunks = split_slice(forward.layout.local, forward.layout.instance,
                               forward.instance_chunk, settings_.exchange_chunks);
}

void ExpertPipeline::split_in_chunks(const ForwardPass& forward, BackwardPass& backward,
                                     const torch::Tensor& context_instance) const {
  if (settings_.exchange_chunks == 1) return;
  backward.chunks = split_slice(backward.layout.local, backward.layout.instance,
                                forward.instance_chunk, settings_.exchange_chunks);
  if (context_instance.defined()) {
    backward.context_chunks = split_slice(backward.context, context_instance,
                                          forward.instance_chunk, settings_.exchange_chunks);
  }
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

void ExpertPipeline::account(const ForwardPass& forward, const BackwardPass& backward) {
  PassAccount pass = account_pass(settings_, forward, backward);
  const auto R = static_cast<std::size_t>(settings_.ranks);
  if (statistics_.forward_load.empty()) {
    for (auto* per_rank : {&statistics_.forward_load, &statistics_.backward_load,
                           &statistics_.bytes_sent, &statistics_.bytes_received}) {
      per_rank->assign(R, 0);
    }
  }
  for (std::size_t r = 0; r < R; ++r) {
    statistics_.forward_load[r] += forward.layout.load[r];
    statistics_.backward_load[r] += backward.layout.load[r];
    statistics_.bytes_sent[r] += pass.bytes_sent[r];
    statistics_.bytes_received[r] += pass.bytes_received[r];
  }
  // Over every process: the scalable plan's layout holds this process's kept pairs only.
  statistics_.pairs_kept +=
      std::accumulate(backward.layout.load.begin(), backward.layout.load.end(), int64_t{0});
  statistics_.traffic += pass.traffic;
  statistics_.modeled += pass.modeled;
  statistics_.pass_returns.push_back(
      {settings_.overlap_gradient_return ? pass.modeled_return : 0.0, pass.backward_cover});
  statistics_.plan += pass.plan;
  statistics_.passes.push_back(std::move(pass.holdings));
}

void ExpertPipeline::time_rank_work(int phase, int64_t rank, int64_t rows,
                                    const torch::Device& device,
                                    const std::function<void()>& work) {
  std::vector<SpanTimer>& timers = rank_timers_[phase];
  if (timers.empty()) timers.resize(static_cast<std::size_t>(settings_.ranks));
  rank_clock_->time(rows, device, timers[static_cast<std::size_t>(rank)], work);
}

LayerStepStatistics ExpertPipeline::take_statistics() {
  statistics_.exchange = exchange_->take_measurement(statistics_.spans.exchange);
  for (int phase = 0; phase < kPhases; ++phase) {
    std::vector<TimedSpans>& spans = statistics_.spans.rank_expert[phase];
    spans.clear();
    for (SpanTimer& timer : rank_timers_[phase]) spans.push_back(timer.take());
  }
  LayerStepStatistics taken = std::move(statistics_);
  statistics_ = LayerStepStatistics{};
  statistics_.layer = settings_.layer;
  return taken;
}

}  // namespace lrmoe
