#include "core/pipeline/expert_pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "core/pipeline/pass_accounting.hpp"
#include "core/pipeline/plan_budget.hpp"
#include "core/pipeline/plugin_output_checks.hpp"
#include "core/pipeline/quota_pools.hpp"
#include "core/pipeline/stopwatch.hpp"
#include "core/pipeline/summed_counts.hpp"
#include "core/plugins/plugin_boundary.hpp"
#include "lrmoe/counter_random.hpp"

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

uint64_t ExpertPipeline::pass_seed(int64_t step) const {
  return mix_seed(settings_.seed, step, settings_.layer, statistics_.pairs_routed);
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
  pass.quota_pool = std::move(plan.quota_pool);
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

torch::Tensor ExpertPipeline::score(const ForwardPass& forward, PairBatch& signals) {
  signals.step = forward.step;
  signals.layer = settings_.layer;
  // The pass index is a global count, so every process draws the same seed (Note [Exact
  // multi-process plan]).
  signals.seed = pass_seed(forward.step);
  signals.experts = forward.experts;
  signals.pair_ids = forward.pair_ids;
  signals.expert_offsets = forward.expert_offsets;
  signals.quota = forward.quota;
  // Checked before it moves to the pairs' device: an undefined or meta tensor cannot move, and
  // its message must name the plugin.
  const torch::Tensor scores = call_policy(PolicyKind::Metric, "score", [&] {
    return policies_->metric->score(for_policy(PolicyKind::Metric, signals));
  });
  check_scores(scores, forward.experts.numel(), settings_.check_plugin_outputs,
               policy_name(PolicyKind::Metric),
               {{"gates", signals.gates},
                {"upstream gradient norms", signals.upstream_norm},
                {"input norms", signals.input_norm},
                {"hidden norms", signals.hidden_norm}});
  return scores.to(forward.experts.device());
}

std::vector<int64_t> ExpertPipeline::backward_quota(const ForwardPass& forward,
                                                    const torch::Tensor& scores) {
  if (forward.quota_pool.empty()) return forward.quota;
  const bool own_pairs = settings_.planning == Planning::Scalable;
  torch::Tensor largest = torch::zeros({1}, torch::kFloat64);
  if (scores.numel() > 0) largest[0] = scores.max().item<double>();
  if (own_pairs) collectives_->max(largest);
  std::vector<int64_t> mass =
      score_mass_units(scores, forward.experts, settings_.num_experts, largest.item<double>());
  if (own_pairs) mass = summed_over_processes(*collectives_, std::move(mass));
  return spread_pool_quotas(forward.quota, forward.quota_pool, forward.computed_counts, mass);
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
  // Once per optimizer step, whatever its passes: the state is updated once.
  if (!statistics_.passes.empty())
    statistics_.modeled.replicas += modeled_host_optimizer_seconds(settings_);
  LayerStepStatistics taken = std::move(statistics_);
  statistics_ = LayerStepStatistics{};
  statistics_.layer = settings_.layer;
  return taken;
}

}  // namespace lrmoe
