#pragma once
// Placement policy: in the forward phase of every MoE layer and step, decide which ranks host
// which instances of each expert (one owner, any number of replicas) and how many of each
// expert's token-expert pairs keep their backward work (the retention quota).
//
// The runner checks every plan against the memory model of lrmoe/memory_model.hpp, per rank r
// and MoE layer: layer_peak_bytes(request.memory, holding(r)) <= budget_bytes, where holding(r)
// counts the instances r owns and the replicas it hosts, the pairs computed on r in forward and
// the kept pairs whose backward work runs on r (replicas count copies: see
// PlacementPlan::co_located_share_copy). Before routing, an expert's forward pairs
// (min(count, forward capacity)) and kept pairs (min(count, quota)) count as split evenly, in
// fractions, over its instances; after routing, the real (whole) per-rank loads are checked
// again. A plan that does not fit stops the run, with the numbers, before any buffer is
// allocated. A placement that plans within the budget calls the same functions.

#include <cstdint>
#include <limits>
#include <vector>

#include "lrmoe/memory_model.hpp"
#include "lrmoe/policy.hpp"

namespace lrmoe {

struct ExpertInstance {
  int64_t expert = 0;
  int64_t rank = 0;    // 0 .. ranks-1
  int64_t slot = 0;    // 0 .. slots_per_rank-1; a (rank, slot) hosts at most one instance
  bool owner = false;  // exactly one instance per expert owns it; the others are replicas
};

struct PlacementRequest {
  int64_t step = 0;   // optimizer step, from 1
  int64_t layer = 0;  // index of the MoE layer among the model's MoE layers
  int64_t num_experts = 0;
  int64_t ranks = 0;
  int64_t slots_per_rank = 0;
  int64_t top_k = 0;
  int64_t tokens = 0;  // tokens in this forward pass, over all ranks
  // Routed pairs per expert in this forward pass, over all ranks (sum = tokens * top_k). Empty
  // when the placement declared that it plans without them (PlacementPolicy::plans_from) and
  // the runner plans it before the layer's router.
  std::vector<int64_t> counts;
  // The counts of earlier forward passes of this layer, oldest first, most recent last; empty
  // on the first one. The runner keeps a bounded number of them.
  std::vector<std::vector<int64_t>> history;
  // The memory model above: the per-rank budget of this MoE layer, always > 0 (the runner
  // refuses a cluster.memory_per_rank that leaves nothing for the MoE layers), and the bytes per
  // instance and per pair.
  int64_t budget_bytes = 0;
  MemoryCosts memory;
};

// What a plan was made from, recorded with every layer step (so a reader knows whether a
// placement saw the counts it is judged on) and used to report a history-based placement's
// warm-up passes apart from its steady state.
enum class PlanInformation {
  ThisPass,       // this pass's routed counts (request.counts): replicas made for them are
                  // needed before this pass's expert compute
  EarlierPasses,  // only request.history (the counts of earlier passes)
  WarmUp,         // would use request.history, but it is still empty (a first pass)
  NoCounts,       // neither: a static placement
};

// The largest capacity factor a placement's parameter should accept (its declared maximum):
// a factor at the expert count already drops no pair, and one near 1e300 would overflow the
// capacity in pairs (int64) into a negative number.
inline constexpr double kMostCapacityFactor = 1e6;

// A quota that keeps every pair of its expert, for a plan made without the counts.
inline constexpr int64_t kKeepEveryPair = std::numeric_limits<int64_t>::max();

// An expert that shares its quota with no other (PlacementPlan::quota_pool).
inline constexpr int64_t kNoQuotaPool = -1;

// Which of an expert's pairs past its forward capacity are dropped.
enum class ForwardDrop {
  LowestGate,  // its lowest gates, ties to the later pair (Megatron's drop by probability)
  // Uniformly at random: a draw per pair that depends on the pass and the pair id alone, so the
  // exact and the scalable plan, on any number of processes, drop the same pairs (a control arm
  // for the gate rule: the same number dropped, chosen without looking at the gates).
  Random,
};

struct PlacementPlan {
  std::vector<ExpertInstance> instances;  // at least one per expert, in any order
  // Per expert: at most this many of its pairs keep their backward work, over all ranks.
  // A quota >= the expert's count keeps all of them; the runner lowers every quota to its
  // expert's routed count before anything reads it.
  std::vector<int64_t> quota;
  // Per expert: at most this many of its pairs are computed in forward (the others are dropped,
  // as capacity-factor baselines do). Empty: every routed pair is computed.
  std::vector<int64_t> forward_capacity;
  ForwardDrop forward_drop = ForwardDrop::LowestGate;  // which pairs past the capacity drop
  // Per expert: the pool of experts whose quotas it shares in backward, or kNoQuotaPool (its
  // quota as planned). Empty: every quota as planned. Once the metric has scored the pass, the
  // runner spreads each pool's summed quota over the pool's experts in proportion to their score
  // mass (each expert's scores summed over its computed pairs), each at most its computed pairs
  // (Note [Quotas by score mass] in docs/notes.md). A pool's kept pairs then total at most what
  // the plan budgeted for it, but move between its experts: pool only experts whose kept pairs
  // use one rank's memory (the runner checks the routed loads against the budget again).
  std::vector<int64_t> quota_pool{};
  // true: the instances of one expert on one rank share one copy of its parameters and one
  // gradient buffer, so a second instance adds capacity (its own slot, its own pairs) but no
  // parameter bytes, and nothing moves to it over a link. false: every instance holds its own
  // copy in its slot (SYMI's slots, Note [SYMI as published]); a rank still receives an
  // expert's parameters, and sends its gradients, once (the copy between its slots is local).
  bool co_located_share_copy = false;
  PlanInformation information = PlanInformation::ThisPass;
};

class PlacementPolicy : public Policy {
 public:
  // What plan() reads, declared before any call. A placement that never reads request.counts
  // (EarlierPasses or NoCounts) is planned before its layer's router, with request.counts
  // empty, so that its replicas' weights can travel behind the previous MoE layer's compute
  // (Note [Overlapped expert fetch]); each of its plans must then say so in `information`
  // (not ThisPass). The default, ThisPass, is planned after the router, with the counts.
  virtual PlanInformation plans_from() const { return PlanInformation::ThisPass; }
  virtual PlacementPlan plan(const PlacementRequest& request) = 0;
};

}  // namespace lrmoe
