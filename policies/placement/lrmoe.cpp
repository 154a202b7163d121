// Placement "lrmoe": LRMoE's joint planner of replicas and backward retention quotas under the
// per-rank memory budget. Every routed pair is computed in forward unless no placement lets the
// forward fit (step 2c); the quotas decide how many keep their backward work.
//
// Per MoE layer and step, with n_e this pass's routed pairs of expert e and cnt_e its instances:
//  1. Owners are static, exactly as fixed_ownership (lrmoe/static_owners.hpp: expert e on rank
//     e / ceil(E/R), slot e % ceil(E/R)), so expert optimizer state never moves.
//  2. Replicas balance the forward load F(r) = sum over the instances on r of n_e / cnt_e. At
//     most max_replicas times: take the most loaded rank r_max and its instance e with the largest
//     n_e / cnt_e; take the least-loaded rank t that has a free slot, does not host e, and whose
//     memory (step 4, with no backward pairs) fits one more replica and n_e / (cnt_e + 1) more
//     forward pairs; add a replica of e on t's lowest free slot if both t's and r_max's new loads
//     stay below F(r_max), else stop.
//  2b. Replicas that make the forward fit. LRMoE computes every routed pair in forward, so a
//     rank whose forward share alone (no backward pairs) does not fit (step 4) would fail the
//     run whatever the quotas. While one does not (the one furthest over, equal: the lowest),
//     its instance with the largest n_e / cnt_e gets a replica on the least-loaded rank that
//     has a free slot, does not host e, and fits one more replica and n_e / (cnt_e + 1) more
//     forward pairs; when no rank fits that yet (an expert that needs several more instances,
//     as with more ranks than experts), on the least-loaded such rank whose forward share stays
//     below the over rank's, which brings the fit closer, unless the over rank's instances alone
//     do not fit. These replicas are added whatever max_replicas says; it stops when every rank
//     fits or no rank can take the replica (the runner then reports the numbers).
//  2c. The forward fallback (forward_fallback = true, the default). When replicas cannot make
//     every rank's forward fit, each instance computes at most c pairs: c the largest whole
//     number at which every rank fits with min(n_e / cnt_e, c) forward pairs per instance and no
//     backward pairs; expert e's forward capacity is min(n_e, c * cnt_e), its lowest gates past
//     it dropped, which the runner records as forward drops. A run goes on where a system that
//     computes every pair would stop; what it drops is the least the budget allows, from the
//     experts that overflow it. n_e below means the computed pairs, min(n_e, capacity). Replicas
//     step 2b placed to bring a fit closer, on ranks whose instances alone do not fit, are taken
//     back first (the last placed first), as the cap does better. When even c = 0 does not fit
//     with the owners alone, nothing is capped and the runner reports the numbers.
//  3. Quotas by water-filling per instance: q_e = min(n_e, floor(cnt_e * tau)), tau the largest
//     level with sum q_e <= K = ceil(keep_fraction * sum n) and every rank within its budget
//     (step 4). With keep_fraction 1 (the default) the budget alone sets the quotas: the largest
//     that fit. A replicated expert spreads its backward work over its instances, so it may keep
//     proportionally more.
//  4. Memory: the runner's model (lrmoe/memory_model.hpp): layer_fits(memory, {owned(r),
//     replicas(r), F(r), Bk(r)}, (1 - headroom) * budget_bytes) for every rank, with Bk(r) = sum
//     over the instances on r of q_e / cnt_e. The headroom is for routing: the runner checks the
//     routed loads, not this even split, against the whole budget. tau is lowered (bisection) until
//     every rank fits; if even tau = 0 does not fit, the quotas are all 0 and the runner reports
//     the numbers that do not fit.
//  5. Quotas by score mass (quota_by = "score_mass", a variant beyond the paper): the quotas of
//     step 3 are the budget each rank's kept pairs may use, but within one rank the pairs that
//     carry most of the gradient may belong to one expert. Each rank's unreplicated experts form
//     a quota pool: in backward the runner spreads the pool's summed quota over them in
//     proportion to their score mass (Note [Quotas by score mass]), so no rank keeps more than it
//     budgeted. A replicated expert spreads its kept pairs over several ranks and keeps its quota.
// Edge cases: an expert with n_e = 0 keeps nothing. Once tau >= 1 every expert with n_e > 0 keeps
// at least one pair; a small K or a tight budget can leave tau < 1, and then only replicated
// experts (cnt_e * tau >= 1) keep any. Ties go to the lower rank and the lower expert index.

#include <lrmoe/plugin.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <utility>

namespace {

// The instances planned so far, with the per-expert and per-rank counts the steps need.
struct Layout {
  std::vector<lrmoe::ExpertInstance> instances;
  std::vector<int64_t> copies;  // cnt_e
  // Instances per rank. Slots fill from 0 up, so this is also the rank's lowest free slot.
  std::vector<int64_t> hosted;
  std::vector<int64_t> owned;  // owners per rank
  std::vector<char> hosting;   // [experts * ranks]: whether the rank hosts an instance of it

  lrmoe::LayerHolding holding(size_t rank, double forward_pairs, double backward_pairs) const {
    return {owned[rank], hosted[rank] - owned[rank], forward_pairs, backward_pairs};
  }

  bool hosts(int64_t rank, int64_t expert) const {
    return hosting[static_cast<size_t>(expert) * hosted.size() + static_cast<size_t>(rank)] != 0;
  }

  void add(const lrmoe::ExpertInstance& instance) {
    instances.push_back(instance);
    hosting[static_cast<size_t>(instance.expert) * hosted.size() +
            static_cast<size_t>(instance.rank)] = 1;
    ++hosted[static_cast<size_t>(instance.rank)];
    ++copies[static_cast<size_t>(instance.expert)];
  }

  // Per rank, the sum over its instances of pairs_e / cnt_e: each expert's pairs split evenly
  // over its instances, as the runner's memory check counts them before routing.
  std::vector<double> per_rank_share(const std::vector<int64_t>& pairs) const {
    std::vector<double> share;
    per_rank_share(pairs, share);
    return share;
  }
  void per_rank_share(const std::vector<int64_t>& pairs, std::vector<double>& share) const {
    share.assign(hosted.size(), 0.0);
    for (const lrmoe::ExpertInstance& instance : instances) {
      const auto e = static_cast<size_t>(instance.expert);
      share[static_cast<size_t>(instance.rank)] +=
          static_cast<double>(pairs[e]) / static_cast<double>(copies[e]);
    }
  }

  // pairs_e / (cnt_e + extra): an instance's share of its expert's pairs with `extra` more copies.
  double share(const std::vector<int64_t>& pairs, int64_t expert, int64_t extra = 0) const {
    const auto e = static_cast<size_t>(expert);
    return static_cast<double>(pairs[e]) / static_cast<double>(copies[e] + extra);
  }

  // The expert of `rank`'s instance with the largest share (equal: the lower expert), among
  // those with pairs; -1 if it has none.
  int64_t hottest_on(int64_t rank, const std::vector<int64_t>& pairs) const {
    int64_t hot = -1;
    double most = 0;
    for (const lrmoe::ExpertInstance& instance : instances) {
      const double s = share(pairs, instance.expert);
      if (instance.rank == rank && s > 0 &&
          (hot < 0 || s > most || (s == most && instance.expert < hot))) {
        hot = instance.expert;
        most = s;
      }
    }
    return hot;
  }

  // The least-loaded rank (equal: the lowest) that has a free slot, does not host `expert`, and
  // `accepts`; -1 if none does.
  template <typename Accepts>
  int64_t least_loaded_free(const lrmoe::PlacementRequest& request, int64_t expert,
                            const std::vector<double>& load, Accepts accepts) const {
    int64_t target = -1;
    for (int64_t r = 0; r < request.ranks; ++r) {
      const auto i = static_cast<size_t>(r);
      if (hosted[i] < request.slots_per_rank && !hosts(r, expert) && accepts(i) &&
          (target < 0 || load[i] < load[static_cast<size_t>(target)])) {
        target = r;
      }
    }
    return target;
  }

  // A rank for a replica of `expert` that fits it and `after` more forward pairs within `budget`.
  int64_t replica_target(const lrmoe::PlacementRequest& request, int64_t expert, double after,
                         const std::vector<double>& load, int64_t budget) const {
    return least_loaded_free(request, expert, load, [&](size_t i) {
      lrmoe::LayerHolding with_replica = holding(i, load[i] + after, 0);
      ++with_replica.replicas;
      return lrmoe::layer_fits(request.memory, with_replica, budget);
    });
  }

  // A rank whose forward share with `after` more pairs stays below `ceiling`, memory aside.
  int64_t relief_target(const lrmoe::PlacementRequest& request, int64_t expert, double after,
                        const std::vector<double>& load, double ceiling) const {
    return least_loaded_free(request, expert, load,
                             [&](size_t i) { return load[i] + after < ceiling; });
  }

  void add_replica(int64_t expert, int64_t rank) {
    add({expert, rank, hosted[static_cast<size_t>(rank)], false});
  }

  // Removes the replica added last on `rank` (the one in its highest slot); false if it has none.
  bool remove_last_replica(int64_t rank) {
    for (auto it = instances.rbegin(); it != instances.rend(); ++it) {
      if (it->rank != rank || it->owner) continue;
      hosting[static_cast<size_t>(it->expert) * hosted.size() + static_cast<size_t>(rank)] = 0;
      --copies[static_cast<size_t>(it->expert)];
      --hosted[static_cast<size_t>(rank)];
      instances.erase(std::next(it).base());
      return true;
    }
    return false;
  }
};

// The least tau >= 0 at which a quota of `copies` instances, trunc(copies * tau) as computed in
// doubles, reaches m >= 1. Near m / copies: the product's rounding moves it by an ulp or two.
double tau_reaching(int64_t copies, int64_t m) {
  const auto c = static_cast<double>(copies);
  const auto target = static_cast<double>(m);
  double t = target / c;
  while (c * t < target) t = std::nextafter(t, std::numeric_limits<double>::infinity());
  for (double below = std::nextafter(t, 0.0); c * below >= target; below = std::nextafter(t, 0.0))
    t = below;
  return t;
}

class LrmoePlanner : public lrmoe::PlacementPolicy {
 public:
  explicit LrmoePlanner(const lrmoe::Parameters& parameters)
      : keep_fraction_(parameters.real("keep_fraction")),
        max_replicas_(parameters.integer("max_replicas")),
        headroom_(parameters.real("headroom")),
        forward_fallback_(parameters.boolean("forward_fallback")),
        by_score_mass_(parameters.text("quota_by") == "score_mass") {}

  lrmoe::PlacementPlan plan(const lrmoe::PlacementRequest& request) override {
    Layout layout = owners(request);
    add_replicas(request, layout);
    replicate_until_forward_fits(request, layout);
    lrmoe::PlacementPlan plan;
    std::vector<int64_t> computed = request.counts;
    if (forward_fallback_) {
      plan.forward_capacity = forward_capacity(request, layout);
      for (size_t e = 0; e < plan.forward_capacity.size(); ++e)
        computed[e] = std::min(computed[e], plan.forward_capacity[e]);
    }
    plan.quota = quotas(request, layout, computed);
    if (by_score_mass_) plan.quota_pool = owner_pools(layout);
    plan.instances = std::move(layout.instances);
    // Replicas for this pass's counts: their weights are sent before its expert compute.
    plan.information = lrmoe::PlanInformation::ThisPass;
    return plan;
  }

 private:
  // Step 1.
  static Layout owners(const lrmoe::PlacementRequest& request) {
    const auto E = static_cast<size_t>(request.num_experts);
    const auto R = static_cast<size_t>(request.ranks);
    Layout layout{{},
                  std::vector<int64_t>(E, 0),
                  std::vector<int64_t>(R, 0),
                  {},
                  std::vector<char>(E * R, 0)};
    for (const lrmoe::ExpertInstance& owner :
         lrmoe::static_owners(request.num_experts, request.ranks))
      layout.add(owner);
    layout.owned = layout.hosted;
    return layout;
  }

  // Step 2.
  void add_replicas(const lrmoe::PlacementRequest& request, Layout& layout) const {
    const std::vector<int64_t>& pairs = request.counts;
    for (int64_t added = 0; added < max_replicas_; ++added) {
      // The busiest rank (equal: the lowest) and its hottest instance.
      const std::vector<double> load = layout.per_rank_share(pairs);
      const auto busiest =
          static_cast<int64_t>(std::max_element(load.begin(), load.end()) - load.begin());
      const int64_t hot = layout.hottest_on(busiest, pairs);
      if (hot < 0) return;  // no pairs at all
      const double now = layout.share(pairs, hot);
      const double after = layout.share(pairs, hot, 1);
      const int64_t target =
          layout.replica_target(request, hot, after, load, planning_budget(request));
      // Only a replica that lowers the peak.
      const double peak = load[static_cast<size_t>(busiest)];
      if (target < 0 ||
          std::max(load[static_cast<size_t>(target)] + after, peak - now + after) >= peak) {
        return;
      }
      layout.add_replica(hot, target);
    }
  }

  // Step 2b.
  void replicate_until_forward_fits(const lrmoe::PlacementRequest& request, Layout& layout) const {
    const std::vector<int64_t>& pairs = request.counts;
    const int64_t budget = planning_budget(request);
    // Every pass adds an instance, so there are at most ranks * slots passes.
    for (;;) {
      const std::vector<double> load = layout.per_rank_share(pairs);
      int64_t over = -1;
      double furthest = 0;
      for (size_t r = 0; r < load.size(); ++r) {
        const double excess =
            lrmoe::layer_peak_bytes(request.memory, layout.holding(r, load[r], 0)) -
            static_cast<double>(budget);
        if (excess > 0 && (over < 0 || excess > furthest)) {
          over = static_cast<int64_t>(r);
          furthest = excess;
        }
      }
      if (over < 0) return;
      const int64_t hot = layout.hottest_on(over, pairs);
      if (hot < 0) return;  // only owned parameters: no replica helps
      const double after = layout.share(pairs, hot, 1);
      int64_t target = layout.replica_target(request, hot, after, load, budget);
      // A rank whose instances alone do not fit gains nothing from sharing pairs.
      const auto o = static_cast<size_t>(over);
      if (target < 0 && lrmoe::layer_fits(request.memory, layout.holding(o, 0, 0), budget))
        target = layout.relief_target(request, hot, after, load, load[o]);
      if (target < 0) return;
      layout.add_replica(hot, target);
    }
  }

  // Step 2c: per expert, the forward capacity that makes every rank's forward fit, or none (empty)
  // when the forward fits as it is or nothing would make it. Fitting only gets harder as c grows,
  // so a bisection over whole pairs per instance finds the largest c that fits.
  std::vector<int64_t> forward_capacity(const lrmoe::PlacementRequest& request,
                                        Layout& layout) const {
    const std::vector<int64_t>& pairs = request.counts;
    const int64_t budget = planning_budget(request);
    std::vector<int64_t> capped(pairs.size());
    std::vector<double> load;
    auto fits_at = [&](int64_t c) {
      for (size_t e = 0; e < pairs.size(); ++e)
        capped[e] = std::min(pairs[e], c * layout.copies[e]);
      layout.per_rank_share(capped, load);
      for (size_t r = 0; r < load.size(); ++r)
        if (!lrmoe::layer_fits(request.memory, layout.holding(r, load[r], 0), budget)) return false;
      return true;
    };
    const int64_t most = pairs.empty() ? 0 : *std::max_element(pairs.begin(), pairs.end());
    if (fits_at(most)) return {};
    for (size_t r = 0; r < layout.hosted.size(); ++r) {
      while (!lrmoe::layer_fits(request.memory, layout.holding(r, 0, 0), budget) &&
             layout.remove_last_replica(static_cast<int64_t>(r))) {
      }
    }
    if (!fits_at(0)) return {};
    int64_t low = 0, high = most;  // fits at low, not at high
    while (high - low > 1) {
      const int64_t middle = low + (high - low) / 2;
      (fits_at(middle) ? low : high) = middle;
    }
    std::vector<int64_t> capacity(pairs.size());
    for (size_t e = 0; e < pairs.size(); ++e)
      capacity[e] = std::min(pairs[e], low * layout.copies[e]);
    return capacity;
  }

  // Steps 3 and 4: the largest tau that keeps sum q <= K and every rank within its budget. Both
  // only get harder as tau grows, so one bisection finds it; it keeps the last tau that passed,
  // so the quotas returned always satisfy both (all 0 when even tau = 0 does not fit). `pairs`:
  // each expert's pairs computed in forward.
  std::vector<int64_t> quotas(const lrmoe::PlacementRequest& request, const Layout& layout,
                              const std::vector<int64_t>& pairs) const {
    // K is a share of the routed pairs, dropped ones included.
    const auto total = std::accumulate(request.counts.begin(), request.counts.end(), int64_t{0});
    const auto keep = static_cast<int64_t>(std::ceil(keep_fraction_ * static_cast<double>(total)));
    const std::vector<double> forward = layout.per_rank_share(pairs);

    // Quotas at one tau, into a buffer the search keeps: each halving evaluates them once. cnt_e *
    // tau >= 0, so truncation is the floor (no call to floor per expert).
    auto quotas_at = [&](double tau, std::vector<int64_t>& quota) {
      quota.resize(pairs.size());
      for (size_t e = 0; e < pairs.size(); ++e) {
        quota[e] =
            std::min(pairs[e], static_cast<int64_t>(static_cast<double>(layout.copies[e]) * tau));
      }
    };
    std::vector<double> backward;
    auto feasible = [&](const std::vector<int64_t>& quota) {
      if (std::accumulate(quota.begin(), quota.end(), int64_t{0}) > keep) {
        return false;
      }
      layout.per_rank_share(quota, backward);
      for (size_t r = 0; r < layout.hosted.size(); ++r) {
        if (!lrmoe::layer_fits(request.memory, layout.holding(r, forward[r], backward[r]),
                               planning_budget(request))) {
          return false;
        }
      }
      return true;
    };

    // At tau = max n every quota is its count (cnt_e >= 1).
    double low = 0;
    double high =
        static_cast<double>(pairs.empty() ? 0 : *std::max_element(pairs.begin(), pairs.end()));
    std::vector<int64_t> at_low, at_middle, at_high;
    quotas_at(high, at_high);
    if (feasible(at_high)) return at_high;
    // The quotas change only at tau = m / cnt_e (as the product rounds); 100 halvings of
    // [0, max n] end closer to the last feasible change than any two changes are apart. Each
    // quota is monotone in tau, and feasibility changes only where the quotas do, so the
    // boundary is a change: the halvings close in on it and could do so to the last bit. They
    // stop once every quota that differs between `low` and `high` rises by one, all at the same
    // tau: every later halving keeps the quotas at `low` (below that tau) or drops those at
    // `high` (at or above it), so these are the quotas they would return.
    quotas_at(low, at_low);
    auto one_change_between = [&] {
      double at = -1;
      for (size_t e = 0; e < pairs.size(); ++e) {
        if (at_high[e] == at_low[e]) continue;
        if (at_high[e] != at_low[e] + 1) return false;
        const double t = tau_reaching(layout.copies[e], at_low[e] + 1);
        if (at >= 0 && t != at) return false;
        at = t;
      }
      return true;
    };
    for (int i = 0; i < 100 && !one_change_between(); ++i) {
      const double middle = low + (high - low) / 2;
      quotas_at(middle, at_middle);
      if (feasible(at_middle)) {
        low = middle;
        std::swap(at_low, at_middle);
      } else {
        high = middle;
        std::swap(at_high, at_middle);
      }
    }
    return at_low;
  }

  // Step 5: each unreplicated expert in its owner rank's pool.
  static std::vector<int64_t> owner_pools(const Layout& layout) {
    std::vector<int64_t> pool(layout.copies.size(), lrmoe::kNoQuotaPool);
    for (const lrmoe::ExpertInstance& instance : layout.instances) {
      const auto e = static_cast<size_t>(instance.expert);
      if (instance.owner && layout.copies[e] == 1) pool[e] = instance.rank;
    }
    return pool;
  }

  // The budget the plan is made for: the runner checks the routed loads, which differ from the
  // even split the plan assumes by a few pairs per rank, against the whole budget.
  int64_t planning_budget(const lrmoe::PlacementRequest& request) const {
    return static_cast<int64_t>(static_cast<double>(request.budget_bytes) * (1.0 - headroom_));
  }

  double keep_fraction_;
  int64_t max_replicas_;
  double headroom_;
  bool forward_fallback_;
  bool by_score_mass_;
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<LrmoePlanner>(
      "lrmoe", "4.2.0",
      "static owners, load-balancing replicas and water-filled backward quotas within the memory "
      "budget",
      {lrmoe::real_parameter(
           "keep_fraction", 1.0,
           "at most this share of this pass's routed pairs keeps its backward work; within it the "
           "quotas are the largest the memory budget holds (0 keeps none)",
           0, 1),
       lrmoe::integer_parameter("max_replicas", 4,
                                "replicas added per layer to balance the forward load, at most "
                                "(those the forward needs to fit the budget come on top)",
                                0),
       lrmoe::real_parameter(
           "headroom", 0.03,
           "share of the budget the plan leaves free, because routed loads differ from the even "
           "split over instances the plan assumes",
           0, 0.5),
       lrmoe::boolean_parameter(
           "forward_fallback", true,
           "when no replicas let the forward fit the budget, cap the pairs each instance computes "
           "and drop the lowest gates past the cap (recorded as forward drops) instead of stopping "
           "the run"),
       lrmoe::text_parameter(
           "quota_by", "count",
           "count: each expert keeps its water-filled quota; score_mass: each rank's unreplicated "
           "experts share their quotas in proportion to the score mass of their pairs, once the "
           "metric has scored them (a variant beyond the paper)",
           {"count", "score_mass"})});
}

}  // namespace

LRMOE_PLUGIN(describe)
