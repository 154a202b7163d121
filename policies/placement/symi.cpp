// Placement "symi": SYMI (arXiv 2504.19925) re-places expert parameters every iteration, with
// replica counts that follow the previous iteration's popularity, while optimizer state stays
// statically partitioned (so only parameters move). Nothing is dropped in backward.
//
// Replica counts over the R*S slots (S slots per rank), from the previous pass's counts n_e
// (equal counts on the first pass, when there is no history yet):
//   goal_e = n_e / sum(n) * R * S;   cnt_e = floor(max(goal_e, 1))      (at least one instance)
//   while sum(cnt) > R*S: among experts with cnt_e > 1, remove one from the largest cnt_e - goal_e
//   while sum(cnt) < R*S: add one to the smallest cnt_e - goal_e
// Ties go to the lowest expert index. Layout is contiguous and slot-major: expert e fills the
// next cnt_e entries of a list of R*S, entry i being slot i % S of rank i / S; an expert's first
// instance owns it.
//
// capacity_factor > 0 keeps SYMI's forward capacity: slot capacity = ceil(capacity_factor *
// this pass's pairs / (S*R)), and expert e computes at most slot capacity * cnt_e pairs. 0 is
// dropless.
//
// SYMI keeps every computed pair in backward, so under a memory budget that binds its only
// choice is how many pairs a slot computes. fit_budget = true lowers the slot capacity to the
// largest c at which every rank fits the runner's memory model (lrmoe/memory_model.hpp) with
// c * slots(r) pairs forward and backward; at 0 nothing fits and the runner reports the numbers.
// The published system does not do this: it is the operating point a memory-bound SYMI must choose.

#include <lrmoe/plugin.hpp>

#include <cmath>
#include <numeric>

namespace {

std::vector<int64_t> replica_counts(const std::vector<int64_t>& popularity, int64_t slots) {
  const auto total =
      static_cast<double>(std::accumulate(popularity.begin(), popularity.end(), int64_t{0}));
  const size_t experts = popularity.size();
  std::vector<double> goal(experts);
  std::vector<int64_t> count(experts);
  for (size_t e = 0; e < experts; ++e) {
    goal[e] = static_cast<double>(popularity[e]) / total * static_cast<double>(slots);
    count[e] = static_cast<int64_t>(std::floor(std::max(goal[e], 1.0)));
  }
  int64_t used = std::accumulate(count.begin(), count.end(), int64_t{0});
  auto excess = [&](size_t e) { return static_cast<double>(count[e]) - goal[e]; };
  // Strict comparisons keep the lowest index on ties. slots >= experts, so while too many slots
  // are used some expert has more than one.
  while (used > slots) {
    size_t pick = experts;
    for (size_t e = 0; e < experts; ++e) {
      if (count[e] > 1 && (pick == experts || excess(e) > excess(pick))) {
        pick = e;
      }
    }
    --count[pick];
    --used;
  }
  while (used < slots) {
    size_t pick = 0;
    for (size_t e = 1; e < experts; ++e) {
      if (excess(e) < excess(pick)) {
        pick = e;
      }
    }
    ++count[pick];
    ++used;
  }
  return count;
}

class Symi : public lrmoe::PlacementPolicy {
 public:
  explicit Symi(const lrmoe::Parameters& parameters)
      : capacity_factor_(parameters.real("capacity_factor")),
        fit_budget_(parameters.boolean("fit_budget")) {}

  lrmoe::PlacementPlan plan(const lrmoe::PlacementRequest& request) override {
    const int64_t slots_per_rank = request.slots_per_rank;
    const int64_t slots = request.ranks * slots_per_rank;
    std::vector<int64_t> popularity(static_cast<size_t>(request.num_experts), 1);
    if (!request.history.empty() && std::accumulate(request.history.back().begin(),
                                                    request.history.back().end(), int64_t{0}) > 0) {
      popularity = request.history.back();
    }
    const std::vector<int64_t> count = replica_counts(popularity, slots);

    lrmoe::PlacementPlan plan;
    int64_t entry = 0;
    for (int64_t e = 0; e < request.num_experts; ++e) {
      for (int64_t j = 0; j < count[static_cast<size_t>(e)]; ++j, ++entry) {
        plan.instances.push_back({e, entry / slots_per_rank, entry % slots_per_rank, j == 0});
      }
    }
    plan.quota = request.counts;
    if (capacity_factor_ > 0) {
      const auto pairs = std::accumulate(request.counts.begin(), request.counts.end(), int64_t{0});
      auto slot_capacity = static_cast<int64_t>(
          std::ceil(capacity_factor_ * static_cast<double>(pairs) / static_cast<double>(slots)));
      if (fit_budget_)
        slot_capacity = largest_fitting_capacity(request, plan.instances, slot_capacity);
      for (const int64_t c : count) {
        plan.forward_capacity.push_back(slot_capacity * c);
      }
    }
    return plan;
  }

 private:
  // The largest slot capacity <= `most` at which every rank fits the budget (0 when none does):
  // fitting only gets harder as the capacity grows, so a bisection finds it.
  static int64_t largest_fitting_capacity(const lrmoe::PlacementRequest& request,
                                          const std::vector<lrmoe::ExpertInstance>& instances,
                                          int64_t most) {
    std::vector<lrmoe::LayerHolding> ranks(static_cast<size_t>(request.ranks));
    for (const lrmoe::ExpertInstance& instance : instances) {
      lrmoe::LayerHolding& h = ranks[static_cast<size_t>(instance.rank)];
      ++(instance.owner ? h.owned : h.replicas);
    }
    auto fits = [&](int64_t capacity) {
      for (lrmoe::LayerHolding h : ranks) {
        h.forward_pairs = h.backward_pairs = static_cast<double>(capacity * (h.owned + h.replicas));
        if (!lrmoe::layer_fits(request.memory, h, request.budget_bytes)) return false;
      }
      return true;
    };
    int64_t low = 0, high = most;  // fits(low) is assumed; high is the answer when it fits
    if (fits(high)) return high;
    while (high - low > 1) {
      const int64_t middle = low + (high - low) / 2;
      (fits(middle) ? low : high) = middle;
    }
    return low;
  }

  double capacity_factor_;
  bool fit_budget_;
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<Symi>(
      "symi", "1.1.0", "replicas follow the previous pass's popularity over all slots (SYMI)",
      {lrmoe::real_parameter(
           "capacity_factor", 1.0,
           "forward capacity per slot, as a multiple of the mean pairs per slot; 0 is dropless", 0),
       lrmoe::boolean_parameter(
           "fit_budget", false,
           "lower the slot capacity until every rank fits the memory budget (needs "
           "capacity_factor > 0)")});
}

}  // namespace

LRMOE_PLUGIN(describe)
