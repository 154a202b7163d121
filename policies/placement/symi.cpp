// Placement "symi": SYMI (arXiv 2504.19925) as its paper describes it, Note [SYMI as published]
// in docs/notes.md. Every pass re-places the expert instances over S slots per rank, with
// replica counts that follow the previous pass's popularity; optimizer state stays statically
// partitioned, so only parameters move. Nothing is dropped in backward.
//
// Replica counts over the R*S slots, from the previous pass's counts n_e (equal counts on the
// first pass, which has no history: the warm-up):
//   goal_e = n_e / sum(n) * R * S;   cnt_e = floor(max(goal_e, 1))      (at least one instance)
//   while sum(cnt) > R*S: among experts with cnt_e > 1, remove one from the largest cnt_e - goal_e
//   while sum(cnt) < R*S: add one to the smallest cnt_e - goal_e
// Ties go to the lowest expert index. With layout = "distinct_ranks" no count exceeds R, and
// slots no expert can take stay empty.
//
// Layouts. "contiguous" (the paper's): expert e fills the next cnt_e entries of a list of R*S,
// entry i being slot i % S of rank i / S, so an expert's instances share ranks where they can;
// the first instance owns it. "distinct_ranks" (a harness variant, the constraint DeepSpeed
// puts on replicas): experts in decreasing count each take the ranks with the most free slots
// that do not host them yet, ties to the lowest rank; the first owns it.
//
// Capacity: slot capacity = ceil(capacity_factor * tokens * top_k / (S*R)); expert e computes at
// most slot capacity * cnt_e pairs. 0 is dropless. Which pairs past it drop: drop = "random" (the
// default) chooses them uniformly at random. The paper says only that tokens past an expert's
// capacity drop, not which; SYMI is built on DeepSpeed, whose top-1 gate keeps a random
// selection of an overloaded expert's tokens by default (random token selection), and SYMI is
// read as keeping that (an inference, Note [SYMI as published]). drop = "lowest_gate" (a harness
// variant, symi 2.x's only rule) drops each expert's lowest gates.
//
// Slots per rank. slots = "fit" (the default) uses the most slots per rank, from the runner's
// cluster.slots_per_rank down to ceil(E/R), at which every rank fits the memory model
// (lrmoe/memory_model.hpp) with slot capacity pairs per instance forward and backward (dropless:
// the previous pass's counts, scaled to this pass, split evenly over instances); none fitting,
// the fewest. slots = "all" uses every slot.
//
// co_located = "own_copy" (the paper's slots): each instance holds its own copy of the
// parameters and a gradient buffer. "shared_copy" (a harness variant): one expert's instances on
// one rank share one copy.
//
// fit_budget = true (a harness variant, not the published system): the slot capacity is lowered
// to the largest at which every rank fits; at 0 nothing fits and the runner reports the numbers.

#include <lrmoe/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>
#include <stdexcept>
#include <utility>

namespace {

std::vector<int64_t> replica_counts(const std::vector<int64_t>& popularity, int64_t slots,
                                    int64_t most_per_expert) {
  const auto total =
      static_cast<double>(std::accumulate(popularity.begin(), popularity.end(), int64_t{0}));
  const size_t experts = popularity.size();
  std::vector<double> goal(experts);
  std::vector<int64_t> count(experts);
  for (size_t e = 0; e < experts; ++e) {
    goal[e] = static_cast<double>(popularity[e]) / total * static_cast<double>(slots);
    // max(goal, 1) >= 1, so truncation is the floor: no call to floor per expert and slot count.
    count[e] = std::min(most_per_expert, static_cast<int64_t>(std::max(goal[e], 1.0)));
  }
  int64_t used = std::accumulate(count.begin(), count.end(), int64_t{0});
  auto excess = [&](size_t e) { return static_cast<double>(count[e]) - goal[e]; };
  // One instance at a time to the expert of the largest (removing) or smallest (adding) excess,
  // ties to the lowest index: a heap of the candidates gives each pick in log(experts) where a
  // scan of every expert took experts. Changing one count changes no other's excess.
  using Candidate = std::pair<double, size_t>;  // (excess, expert)
  // The order is total (ties go by index), so the picks do not depend on how the heap was built:
  // it is built only when there is a pick to make, from the candidates at once.
  auto pick_each = [&](auto first, auto can_change, int64_t step, auto more_to_do) {
    if (!more_to_do()) return;
    std::vector<Candidate> candidates;
    candidates.reserve(experts);
    for (size_t e = 0; e < experts; ++e)
      if (can_change(e)) candidates.emplace_back(excess(e), e);
    std::priority_queue<Candidate, std::vector<Candidate>, decltype(first)> heap(
        first, std::move(candidates));
    while (more_to_do() && !heap.empty()) {
      const size_t pick = heap.top().second;
      heap.pop();
      count[pick] += step;
      used += step;
      if (can_change(pick)) heap.emplace(excess(pick), pick);
    }
  };
  // The heap's top is its greatest element by the order given: the largest excess, then the
  // lowest index; or the smallest excess, then the lowest index.
  auto largest_first = [](const Candidate& a, const Candidate& b) {
    return a.first < b.first || (a.first == b.first && a.second > b.second);
  };
  auto smallest_first = [](const Candidate& a, const Candidate& b) {
    return a.first > b.first || (a.first == b.first && a.second > b.second);
  };
  pick_each(
      largest_first, [&](size_t e) { return count[e] > 1; }, -1, [&] { return used > slots; });
  // Every expert on every rank: the other slots stay empty.
  pick_each(
      smallest_first, [&](size_t e) { return count[e] < most_per_expert; }, 1,
      [&] { return used < slots; });
  return count;
}

// The contiguous layout run by run: visit(expert, rank, first slot, n, owner) for each of an
// expert's runs of n consecutive entries on one rank, in entry order; entry i is slot
// i % slots_per_rank of rank i / slots_per_rank, and an expert's first run holds its owner. The
// one walk the plan's instances and the fit loop's check both take, so they cannot disagree;
// by runs, because the fit loop checks every slot count it tries and a division per entry
// showed in profiles.
template <typename Visit>
void for_each_contiguous_run(const std::vector<int64_t>& count, int64_t slots_per_rank,
                             Visit visit) {
  int64_t entry = 0;
  for (size_t e = 0; e < count.size(); ++e) {
    for (int64_t left = count[e]; left > 0;) {
      const int64_t slot = entry % slots_per_rank;
      const int64_t n = std::min(left, slots_per_rank - slot);
      visit(e, entry / slots_per_rank, slot, n, left == count[e]);
      entry += n;
      left -= n;
    }
  }
}

std::vector<lrmoe::ExpertInstance> contiguous_layout(const std::vector<int64_t>& count,
                                                     int64_t slots_per_rank) {
  std::vector<lrmoe::ExpertInstance> instances;
  instances.reserve(static_cast<size_t>(std::accumulate(count.begin(), count.end(), int64_t{0})));
  for_each_contiguous_run(
      count, slots_per_rank, [&](size_t e, int64_t rank, int64_t slot, int64_t n, bool owner) {
        for (int64_t j = 0; j < n; ++j)
          instances.push_back({static_cast<int64_t>(e), rank, slot + j, owner && j == 0});
      });
  return instances;
}

// Each count <= ranks and their sum <= ranks * slots_per_rank, so the greedy always finds a rank.
std::vector<lrmoe::ExpertInstance> distinct_ranks_layout(const std::vector<int64_t>& count,
                                                         int64_t ranks, int64_t slots_per_rank) {
  std::vector<size_t> order(count.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return count[a] > count[b]; });
  std::vector<int64_t> used(static_cast<size_t>(ranks), 0);
  std::vector<lrmoe::ExpertInstance> instances;
  for (const size_t e : order) {
    std::vector<bool> hosts(static_cast<size_t>(ranks), false);
    for (int64_t j = 0; j < count[e]; ++j) {
      size_t pick = used.size();
      for (size_t r = 0; r < used.size(); ++r) {
        if (hosts[r] || used[r] >= slots_per_rank) continue;
        if (pick == used.size() || used[r] < used[pick]) pick = r;
      }
      hosts[pick] = true;
      instances.push_back(
          {static_cast<int64_t>(e), static_cast<int64_t>(pick), used[pick]++, j == 0});
    }
  }
  return instances;
}

class Symi : public lrmoe::PlacementPolicy {
 public:
  explicit Symi(const lrmoe::Parameters& parameters)
      : capacity_factor_(parameters.real("capacity_factor")),
        fit_slots_(parameters.text("slots") == "fit"),
        distinct_ranks_(parameters.text("layout") == "distinct_ranks"),
        shared_copy_(parameters.text("co_located") == "shared_copy"),
        fit_budget_(parameters.boolean("fit_budget")),
        drop_(parameters.text("drop") == "lowest_gate" ? lrmoe::ForwardDrop::LowestGate
                                                       : lrmoe::ForwardDrop::Random) {
    if (fit_budget_ && capacity_factor_ == 0) {
      throw std::invalid_argument(
          "fit_budget = true lowers the slot capacity, which a dropless SYMI (capacity_factor = "
          "0) does not have; set capacity_factor > 0 or fit_budget = false");
    }
  }

  // The previous pass's counts only: planned before the router, its replicas fetched behind the
  // previous layer.
  lrmoe::PlanInformation plans_from() const override {
    return lrmoe::PlanInformation::EarlierPasses;
  }

  lrmoe::PlacementPlan plan(const lrmoe::PlacementRequest& request) override {
    std::vector<int64_t> popularity(static_cast<size_t>(request.num_experts), 1);
    const bool warm_up = request.history.empty();
    if (!warm_up && std::accumulate(request.history.back().begin(), request.history.back().end(),
                                    int64_t{0}) > 0) {
      popularity = request.history.back();
    }
    const int64_t fewest = (request.num_experts + request.ranks - 1) / request.ranks;
    int64_t slots_per_rank = request.slots_per_rank;
    Layout layout = lay_out(request, popularity, slots_per_rank);
    if (fit_slots_) {
      while (slots_per_rank > fewest && !fits(request, layout, layout.slot_capacity)) {
        layout = lay_out(request, popularity, --slots_per_rank);
      }
    }
    int64_t slot_capacity = layout.slot_capacity;
    if (fit_budget_) slot_capacity = largest_fitting_capacity(request, layout, slot_capacity);

    lrmoe::PlacementPlan plan;
    // The contiguous layout is laid out once, at the slots chosen: fits() reads its counts.
    plan.instances = distinct_ranks_ ? std::move(layout.instances)
                                     : contiguous_layout(layout.count, layout.slots_per_rank);
    plan.quota.assign(static_cast<size_t>(request.num_experts), lrmoe::kKeepEveryPair);
    plan.co_located_share_copy = shared_copy_;
    plan.forward_drop = drop_;
    plan.information =
        warm_up ? lrmoe::PlanInformation::WarmUp : lrmoe::PlanInformation::EarlierPasses;
    if (capacity_factor_ > 0) {
      for (const int64_t c : layout.count) plan.forward_capacity.push_back(slot_capacity * c);
    }
    return plan;
  }

 private:
  struct Layout {
    std::vector<int64_t> count;  // [experts] instances
    int64_t slots_per_rank = 0;
    std::vector<lrmoe::ExpertInstance> instances;  // layout = "distinct_ranks" only
    int64_t slot_capacity = 0;                     // 0 when dropless
    std::vector<double> expected_per_instance;     // [experts] dropless: the pairs SYMI expects
  };

  Layout lay_out(const lrmoe::PlacementRequest& request, const std::vector<int64_t>& popularity,
                 int64_t slots_per_rank) const {
    const int64_t slots = request.ranks * slots_per_rank;
    Layout layout;
    layout.count = replica_counts(popularity, slots, distinct_ranks_ ? request.ranks : slots);
    layout.slots_per_rank = slots_per_rank;
    if (distinct_ranks_)
      layout.instances = distinct_ranks_layout(layout.count, request.ranks, slots_per_rank);
    const double pairs = static_cast<double>(request.tokens * request.top_k);
    if (capacity_factor_ > 0) {
      layout.slot_capacity =
          static_cast<int64_t>(std::ceil(capacity_factor_ * pairs / static_cast<double>(slots)));
    } else {
      const auto total =
          static_cast<double>(std::accumulate(popularity.begin(), popularity.end(), int64_t{0}));
      for (size_t e = 0; e < popularity.size(); ++e) {
        layout.expected_per_instance.push_back(static_cast<double>(popularity[e]) / total * pairs /
                                               static_cast<double>(layout.count[e]));
      }
    }
    return layout;
  }

  // Whether every rank fits with `capacity` pairs per instance (dropless: the expected pairs).
  bool fits(const lrmoe::PlacementRequest& request, const Layout& layout, int64_t capacity) const {
    std::vector<lrmoe::LayerHolding> ranks(static_cast<size_t>(request.ranks));
    // `n` instances of `expert` on `rank`, one of them its owner or none. With co_located =
    // "shared_copy", the expert's instances on the rank share the owner's copy there, or else
    // one replica's. Each instance adds its pairs in turn, in layout order, as a list of the
    // instances would.
    auto hold = [&](size_t expert, int64_t rank, int64_t n, bool owner) {
      lrmoe::LayerHolding& h = ranks[static_cast<size_t>(rank)];
      const double pairs = capacity_factor_ > 0 ? static_cast<double>(capacity)
                                                : layout.expected_per_instance[expert];
      for (int64_t j = 0; j < n; ++j) {
        h.forward_pairs += pairs;
        h.backward_pairs += pairs;
      }
      h.owned += owner ? 1 : 0;
      h.replicas += shared_copy_ ? (owner ? 0 : 1) : n - (owner ? 1 : 0);
    };
    if (distinct_ranks_) {
      for (const lrmoe::ExpertInstance& instance : layout.instances)
        hold(static_cast<size_t>(instance.expert), instance.rank, 1, instance.owner);
    } else {
      // From the counts, run by run: no list of every instance for each slot count tried.
      for_each_contiguous_run(
          layout.count, layout.slots_per_rank,
          [&](size_t e, int64_t rank, int64_t, int64_t n, bool owner) { hold(e, rank, n, owner); });
    }
    for (const lrmoe::LayerHolding& h : ranks) {
      if (!lrmoe::layer_fits(request.memory, h, request.budget_bytes)) return false;
    }
    return true;
  }

  // The largest slot capacity <= `most` at which every rank fits the budget (0 when none does):
  // fitting only gets harder as the capacity grows, so a bisection finds it.
  int64_t largest_fitting_capacity(const lrmoe::PlacementRequest& request, const Layout& layout,
                                   int64_t most) const {
    int64_t low = 0, high = most;  // fits(low) is assumed; high is the answer when it fits
    if (fits(request, layout, high)) return high;
    while (high - low > 1) {
      const int64_t middle = low + (high - low) / 2;
      (fits(request, layout, middle) ? low : high) = middle;
    }
    return low;
  }

  double capacity_factor_;
  bool fit_slots_;
  bool distinct_ranks_;
  bool shared_copy_;
  bool fit_budget_;
  lrmoe::ForwardDrop drop_;
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<Symi>(
      "symi", "3.0.0",
      "replicas follow the previous pass's popularity over the slots that fit the budget (SYMI)",
      {lrmoe::real_parameter(
           "capacity_factor", 1.0,
           "forward capacity per slot, as a multiple of the mean pairs per slot; 0 is dropless", 0,
           lrmoe::kMostCapacityFactor),
       lrmoe::text_parameter(
           "slots", "fit",
           "slots per rank: \"fit\", the most that fit the memory budget (at "
           "least experts / ranks); \"all\", every slot of cluster.slots_per_rank",
           {"fit", "all"}),
       lrmoe::text_parameter("layout", "contiguous",
                             "\"contiguous\": an expert's instances fill neighbouring slots, on "
                             "one rank where they can (the paper's); \"distinct_ranks\": each on "
                             "another rank (a harness variant)",
                             {"contiguous", "distinct_ranks"}),
       lrmoe::text_parameter("co_located", "own_copy",
                             "instances of one expert on one rank: \"own_copy\", each slot holds "
                             "its own parameters and gradients (the paper's); \"shared_copy\", one "
                             "copy for all of them (a harness variant)",
                             {"own_copy", "shared_copy"}),
       lrmoe::boolean_parameter(
           "fit_budget", false,
           "a harness variant: lower the slot capacity until every rank fits the memory budget "
           "(needs capacity_factor > 0)"),
       lrmoe::text_parameter("drop", "random",
                             "which pairs past an expert's capacity drop: \"random\", chosen at "
                             "random (DeepSpeed's random token selection, which SYMI runs on); "
                             "\"lowest_gate\", its lowest gates (a harness variant)",
                             {"random", "lowest_gate"})});
}

}  // namespace

LRMOE_PLUGIN(describe)
