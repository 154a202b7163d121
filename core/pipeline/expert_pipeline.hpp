#pragma once
// The LRMoE pipeline of one MoE layer over R logical expert-parallel ranks: the planning of each
// pass (docs/ARCHITECTURE.md walks one step through it).
//
// Forward phase (plan_forward): global per-expert counts -> placement policy (instances and
// retention quotas) checked against the rank memory budget -> forward capacity drops, if the
// placement sets any -> routing policy over instances -> compaction by destination instance.
// Backward phase (plan_backward): metric policy scores every computed pair -> selection policy
// keeps pairs within the quotas (with weights) -> routing policy spreads the kept pairs over
// eligible instances with per-rank capacity -> compaction of the kept pairs only.
// What the plugins return is checked in plugin_output_checks.cpp, plans are checked against the
// memory budget in plan_budget.cpp, and each pass is accounted in pass_accounting.cpp. The
// expert computation itself is in core/model/expert_pairs_function.cpp; pair rows move between
// ranks only through the PairExchange seam.
//
// With several processes (core/pipeline/process_view.hpp) the plan is agreed one of two ways
// (policies.planning). Exact: every process gathers the pairs and the per-pair signals of all
// processes and computes the same plan over all of them (global_pairs.hpp; Note [Exact
// multi-process plan] in docs/notes.md); each pass then says which of its pairs are this
// process's. Scalable: every process plans over its own pairs and counts summed over all, with
// the same quotas, selection counts and loads (Note [Scalable planning]); a pass's pair tensors
// then hold this process's pairs only. The exact planners are in expert_pipeline_exact.cpp, the
// scalable ones in expert_pipeline_from_counts.cpp. Every index below is into the pair order of
// Note [Pair order].

#include <torch/torch.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config/policies_config.hpp"
#include "core/cost/cost_model.hpp"
#include "core/device/span_timer.hpp"
#include "core/pipeline/exchange_chunks.hpp"
#include "core/pipeline/instance_table.hpp"
#include "core/pipeline/layer_statistics.hpp"
#include "core/pipeline/pair_costs.hpp"
#include "core/pipeline/pair_exchange.hpp"
#include "core/pipeline/pair_layout.hpp"
#include "core/pipeline/process_view.hpp"
#include "core/pipeline/rank_clock.hpp"
#include "core/pipeline/stopwatch.hpp"
#include "core/plugins/plugin_boundary.hpp"
#include "core/plugins/policy_set.hpp"

namespace lrmoe {

struct PipelineSettings {
  int64_t layer = 0;  // index among the MoE layers
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t ranks = 1;
  int64_t slots_per_rank = 0;
  int64_t budget_bytes = 0;  // per rank for this layer's instances and token buffers
  PairCosts costs;
  bool recompute = false;
  bool overlap_expert_fetch = true;     // Note [Overlapped expert fetch]
  bool overlap_gradient_return = true;  // the same Note
  int64_t exchange_chunks = 1;          // Note [Chunked exchange]; 1: unchunked
  DroppedPairKeeps dropped_pair_keeps = DroppedPairKeeps::Nothing;
  // The experts' optimizer state in host memory (Note [Optimizer state in host memory]): each
  // step's gradients go down to the host and the updated weights come up, modeled per step.
  bool host_optimizer_state = false;
  bool check_plugin_outputs = true;  // the value checks of plugin_output_checks.hpp
  Planning planning = Planning::Exact;
  PlanClock plan_clock = PlanClock::Wall;  // what PipelineOverhead's parts are timed by
  uint64_t seed = 0;
  CostModel cost_model;
  ProcessView process;
};

// What the forward phase decided, for the backward phase of the same pass.
struct ForwardPass {
  int64_t step = 0;
  // Tensors on the layer's device, counts on the host (Note [Host synchronisation]). The pass's
  // pairs are those of all processes in the exact plan, this process's in the scalable one.
  // [n] int64: routed pairs (expert order) computed in forward
  torch::Tensor computed;
  torch::Tensor experts;                // [n] int64 expert of each computed pair
  std::vector<int64_t> expert_offsets;  // [experts + 1] over the computed pairs
  // The scalable plan's: [experts * ranks here + 1] over the computed pairs, by (expert, home
  // rank here), as home_group_offsets gives them
  std::vector<int64_t> home_group_offsets;
  torch::Tensor home;      // [n] int64 home rank of each computed pair
  torch::Tensor pair_ids;  // [n] int64 PairBatch::pair_ids of each computed pair
  // [experts]: routed pairs (dropped ones included) of each expert over every process, which
  // the router's balancing loss and bias update take as the batch's counts
  std::vector<int64_t> routed_per_expert;
  // [experts]: computed pairs of each expert over every process
  std::vector<int64_t> computed_counts;
  // [ranks]: routed pairs (dropped ones included) homed on each rank
  std::vector<int64_t> routed_per_home_rank;
  // Scalable plan: the histogram rows of each round of the threshold search the forward capacity
  // needed (unset: none needed; empty: a search whose experts all closed before a round, which
  // still sums its groups). Its routed counts are the layout's home_instance.
  std::optional<std::vector<int64_t>> search_rounds;
  std::shared_ptr<const InstanceTable> table;
  std::vector<int64_t> quota;
  // The plan's quota pools (PlacementPlan::quota_pool); empty: the quotas hold in backward.
  std::vector<int64_t> quota_pool;
  PairLayout layout;
  // [home rows of layout] int64: index of each computed pair homed here among this process's
  // routed pairs (as given to plan_forward), in pair order.
  torch::Tensor local_pairs;
  // With exchange_chunks > 1 (Note [Chunked exchange]): [instances] the chunk of each instance,
  // by the forward's rows, which the backward keeps; and the layout's local slice in chunks.
  // Empty unchunked.
  std::vector<int64_t> instance_chunk;
  std::vector<ChunkSlice> chunks;
  // Placed before the router (ExpertPipeline::place_ahead): the modeled forward compute of the
  // previous MoE layer's pass, behind which this pass's replica fetch travels (Note [Overlapped
  // expert fetch]). Absent when placed after the router.
  std::optional<double> fetch_cover_seconds;
};

struct BackwardPass {
  torch::Tensor kept;  // [k] int64 on the device: indices into the computed pairs, increasing
  PairLayout layout;   // over the kept pairs
  // Scalable plan: the histogram rows of each round of the threshold search the selection
  // needed (unset: every pair kept; empty: as the forward's), and [ranks * ranks] kept pairs
  // homed on rank h with their forward instance on rank s, at [h * ranks + s] (without
  // recomputation, and with the context not in place: the context move's index messages)
  std::optional<std::vector<int64_t>> search_rounds;
  std::vector<int64_t> home_forward;
  // [ranks * ranks] on the host: kept pairs whose forward instance is on rank s and backward
  // instance on rank d, at [s * ranks + d]; empty with recomputation, where nothing moves with them
  std::vector<int64_t> by_forward_rank;
  // Scalable plan: every pair kept and routed to its forward instance, so the layout is the
  // forward's and the context move keeps each row where it is, with no collective (Note
  // [Context in place])
  bool context_in_place = false;
  // The kept pairs homed here: their positions among the forward's home rows, and their weights
  // (undefined: all 1). On the device.
  torch::Tensor local_kept;
  torch::Tensor local_weights;
  // Without recomputation (Note [Gradients of dropped pairs]), each kept pair's saved
  // pre-activations move from its forward instance to its backward instance: `context` is this
  // process's part of that move (from the forward ranks, in the destination order of `layout`),
  // `context_rows` the forward destination rows here it takes them from.
  ProcessSlice context;
  torch::Tensor context_rows;
  // With exchange_chunks > 1 (Note [Chunked exchange]), by the forward's chunks of instances:
  // the layout's local slice and the context move in chunks (else empty). Without
  // recomputation, planned exactly or chunked: [ranks * instances] kept pairs from forward rank s
  // to backward instance i at [s * instances + i] (by_forward_rank summed by instance, and each
  // chunk's context move).
  std::vector<ChunkSlice> chunks;
  std::vector<ChunkSlice> context_chunks;
  std::vector<int64_t> forward_instance;
};

class ExpertPipeline {
 public:
  // `collectives`: the processes of the run (settings.process says which this is).
  ExpertPipeline(std::shared_ptr<const PolicySet> policies, PipelineSettings settings,
                 std::shared_ptr<Collectives> collectives);

  // The optimizer step the next passes belong to (from 1).
  void set_step(int64_t step) { step_ = step; }

  // The earlier passes' global counts the placement sees, oldest first: the pipeline's only
  // state between steps, saved in checkpoints (Note [Checkpoints]).
  std::vector<std::vector<int64_t>> history() const { return {history_.begin(), history_.end()}; }
  void restore_history(const std::vector<std::vector<int64_t>>& history) {
    history_.assign(history.begin(), history.end());
  }

  // This process's routed pairs: `experts`, `gates` sorted by expert; `home`: home rank of each
  // pair, all on the training device; `tokens`: this process's tokens (every process has as
  // many).
  std::shared_ptr<const ForwardPass> plan_forward(const torch::Tensor& experts,
                                                  const torch::Tensor& gates,
                                                  const torch::Tensor& home, int64_t tokens);
  // `signals`: gates and norms of the forward's computed pairs homed here (its home rows).
  BackwardPass plan_backward(const ForwardPass& forward, PairBatch signals);

  // Whether the next pass's placement is planned before its router: its policy plans without
  // this pass's counts and the fetch overlaps (Note [Overlapped expert fetch]).
  bool places_ahead() const;
  // Plans the next pass's placement now, for `tokens` tokens per process, its instance table on
  // `device`; its replicas' fetch travels behind `cover_seconds` of modeled compute (the previous
  // MoE layer's forward). The next plan_forward uses it. Only where places_ahead().
  std::shared_ptr<const InstanceTable> place_ahead(int64_t tokens, const torch::Device& device,
                                                   double cover_seconds);

  PairExchange& exchange() { return *exchange_; }
  // The run's processes, for the layer's own collectives (the experts it fetches), and where
  // those transfers are tallied for the step's statistics.
  const std::shared_ptr<Collectives>& collectives() const { return collectives_; }
  ExchangeMeasurement& parameter_transfers() { return statistics_.parameters; }
  const PipelineSettings& settings() const { return settings_; }
  bool recompute() const { return settings_.recompute; }
  bool dropped_pairs_keep_input_grad() const {
    return settings_.dropped_pair_keeps == DroppedPairKeeps::InputGrad;
  }

  // Runs logical rank `rank`'s own expert work in `phase` (kForwardPhase or kBackwardPhase)
  // over `rows` pair rows on `device`, timed by the rank clock into that rank's timer (Note
  // [Critical path], Note [Device timing]).
  void time_rank_work(int phase, int64_t rank, int64_t rows, const torch::Device& device,
                      const std::function<void()>& work);
  void set_rank_clock(std::shared_ptr<RankClock> clock) { rank_clock_ = std::move(clock); }
  // The statistics since the last call (one optimizer step's passes), then starts afresh. The
  // exchanges' and ranks' timed spans come unread (LayerStepStatistics::read_times).
  LayerStepStatistics take_statistics();

 private:
  // Every rank's holding must fit the layer's budget (lrmoe/memory_model.hpp); `stage` says when.
  void check_budget(const std::vector<LayerHolding>& holdings, const std::string& stage) const;
  // Per rank, the pairs of one phase that still fit beside `holdings` (a routing's capacity):
  // `pairs_that_fit` is forward_pairs_that_fit or backward_pairs_that_fit.
  std::vector<int64_t> room(const std::vector<LayerHolding>& holdings,
                            int64_t (*pairs_that_fit)(const MemoryCosts&, LayerHolding,
                                                      int64_t)) const;
  torch::Tensor route(Phase phase, const torch::Tensor& experts, const torch::Tensor& home,
                      const InstanceTable& table, std::vector<int64_t> capacity);
  // The scalable plan's routing: [ranks * instances] pairs per (home rank, instance) for `groups`
  // [ranks * experts] pairs per (home rank, expert), checked.
  std::vector<int64_t> route_counts(Phase phase, std::vector<int64_t> groups,
                                    const std::shared_ptr<const InstanceTable>& table,
                                    std::vector<int64_t> capacity);
  // The placement's plan for `pass`, with `counts` routed pairs per expert over every process of
  // `tokens` tokens each (or the plan placed ahead): sets the pass's step, instance table (on
  // `device`) and quota, each at most its expert's count; the counts join the history.
  PlacementPlan place(ForwardPass& pass, const std::vector<int64_t>& counts, int64_t tokens,
                      const torch::Device& device);
  // The placement policy's plan for `counts` (empty: planned ahead) and its instance table.
  std::pair<PlacementPlan, std::shared_ptr<InstanceTable>> plan_placement(
      const std::vector<int64_t>& counts, int64_t tokens, const torch::Device& device);
  // Checks the plan as planned (loads split evenly over instances), for `computed` pairs per
  // expert; returns the expected backward loads per rank, the room the forward routing leaves.
  std::vector<double> check_as_planned(const InstanceTable& table,
                                       const std::vector<int64_t>& computed,
                                       const std::vector<int64_t>& quota) const;
  // The two plans' forward and backward phases past their own gathers or counts.
  std::shared_ptr<const ForwardPass> plan_forward_exact(const torch::Tensor& experts,
                                                        const torch::Tensor& gates,
                                                        const torch::Tensor& home, int64_t tokens);
  std::shared_ptr<const ForwardPass> plan_forward_from_counts(const torch::Tensor& experts,
                                                              const torch::Tensor& gates,
                                                              const torch::Tensor& home,
                                                              int64_t tokens);
  // The backward planners add the time of each of their parts to `overhead`; plan_backward
  // checks the budget on the routed loads and accounts the pass.
  BackwardPass plan_backward_exact(const ForwardPass& forward, PairBatch signals,
                                   PipelineOverhead& overhead);
  BackwardPass plan_backward_from_counts(const ForwardPass& forward, PairBatch signals,
                                         PipelineOverhead& overhead);
  // With exchange_chunks > 1 (Note [Chunked exchange]), the pass's slices in chunks: the
  // forward's by its own rows, the backward's by the forward's chunks. `context_instance`: the
  // backward instance of each home row of the backward's context move (undefined with
  // recomputation). Unchunked, nothing.
  void split_in_chunks(ForwardPass& forward) const;
  void split_in_chunks(const ForwardPass& forward, BackwardPass& backward,
                       const torch::Tensor& context_instance) const;
  // The seed of this layer's pass of `step`, the same on every process: the pass index is a
  // global count (Note [Exact multi-process plan]); a forward's differs from its backward's.
  uint64_t pass_seed(int64_t step) const;
  // The metric's scores for `signals` (the forward's computed pairs, with their gates and
  // norms), checked, on the pairs' device.
  torch::Tensor score(const ForwardPass& forward, PairBatch& signals);
  // The quotas the selection keeps within: the forward's, each pool's spread over its experts by
  // the score mass of `scores` (the exact plan's every pair, the scalable one's this process's:
  // summed over the processes) when the plan pooled any (Note [Quotas by score mass]).
  std::vector<int64_t> backward_quota(const ForwardPass& forward, const torch::Tensor& scores);
  // Every process's signals of the forward's computed pairs, in pair order.
  PairBatch gather_signals(const ForwardPass& forward, PairBatch local) const;
  // The parts of `pass` this process computes: local kept pairs, weights, the context move from
  // each kept pair's `forward_rank` ([k] int64; undefined with recomputation).
  void localize(const ForwardPass& forward, const torch::Tensor& forward_rank,
                const torch::Tensor& weights, BackwardPass& pass) const;
  // A policy's inputs where its descriptor says it reads them: on the host, a CPU copy.
  torch::Tensor for_policy(PolicyKind kind, const torch::Tensor& tensor) const;
  PairBatch for_policy(PolicyKind kind, PairBatch pairs) const;
  // Adds the pass's holdings, bytes and modeled time to the step's statistics.
  void account(const ForwardPass& forward, const BackwardPass& backward);
  // The plugin name of one policy, and whose plan this pass is, for messages.
  const std::string& policy_name(PolicyKind kind) const;
  // Runs `body`, the call `call` into the plugin of `kind`, through the plugin boundary: what
  // it throws names the plugin, and a crash or hang in it is reported with this step and layer.
  template <typename Body>
  decltype(auto) call_policy(PolicyKind kind, const char* call, Body&& body) const {
    return call_plugin(policies_->records.at(static_cast<std::size_t>(kind)).label, call,
                       PluginCallPlace{step_, settings_.layer}, std::forward<Body>(body));
  }
  std::string plan_name() const;
  // `error` with the step, MoE layer and phase in front, unless it names its step already: every
  // refusal of a plan or a plugin's answer says where it happened.
  PlanError located(const PlanError& error, const char* phase) const;

  std::shared_ptr<const PolicySet> policies_;
  PipelineSettings settings_;
  std::shared_ptr<Collectives> collectives_;
  std::shared_ptr<PairExchange> exchange_;
  std::shared_ptr<RankClock> rank_clock_ = std::make_shared<DeviceRankClock>();
  std::vector<SpanTimer> rank_timers_[kPhases];  // [phase][rank], read by take_statistics
  int64_t step_ = 0;
  // Earlier global counts, oldest first: the same on every process (Note [Exact multi-process
  // plan]).
  std::deque<std::vector<int64_t>> history_;
  // The last count routing's request, kept so that the next one copies the instance table into
  // buffers it already has, or not at all when it routes on the same table (a layer's backward
  // on its forward's): a copy of a list per expert, twice a layer, showed in profiles.
  CountRoutingRequest count_request_;
  std::weak_ptr<const InstanceTable> count_request_table_;  // whose instances it holds
  // The next pass's placement, planned before its router (place_ahead).
  struct PlacedAhead {
    PlacementPlan plan;
    std::shared_ptr<InstanceTable> table;
    double cover_seconds = 0;
  };
  std::optional<PlacedAhead> ahead_;
  LayerStepStatistics statistics_;
};

}  // namespace lrmoe
