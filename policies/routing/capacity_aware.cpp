// Routing "capacity_aware": LRMoE's routing of pairs over the eligible instances (owner and
// replicas) of their expert, within each rank's capacity whenever any routing is.
//
// The runner gives each rank a capacity: the pairs it can still take within its memory budget.
// Ranks differ (replicas and forward buffers take their share), so a greedy fill can strand an
// expert whose instances all sit on ranks that filled early, while another routing would fit.
// This policy instead solves the routing as a transport problem over (expert -> rank) flows,
// which is exact:
//  1. Room. The smallest shift s (an integer, negative while capacity is plentiful) such that
//     every rank r can hold at most capacity[r] + s pairs (at least 0) and all pairs still find
//     an instance in a maximum flow source -> expert (its pairs) -> rank hosting an instance of
//     it -> sink (capacity[r] + s). Found from below: each flow that falls short names a set of
//     experts that cannot fit on the ranks they reach, which raises s to where they could
//     (Hall's condition), until one fits; a handful of flows where bisection took twenty, the
//     same s (tests/test_routing_policies.cpp checks it is the least). So the rank with the least
//     room left has as much as any routing can leave it; with equal capacities that is the smallest
//     busiest rank. s > 0 only when no routing fits: the overflow is then the least possible, on
//     every rank at most s, and the runner reports it.
//  2. Flow. The flow for that s starts from each pair at its home rank where that rank hosts the
//     expert and has room (experts with fewer instances first, equal: the lower index), and
//     augmenting paths (breadth first, lower expert first, an expert's ranks in the order of its
//     instances) place the rest.
//  3. Pairs. Each expert's flow to a rank becomes pairs: first the pairs whose token lives on
//     that rank (no transfer), then the others in pair order, to ranks in the order of the
//     expert's instances (owner first). Two instances of one expert on one rank: the first gets
//     the rank's pairs. Steps 1 and 2 see only counts per (expert, home rank), and step 3 has a
//     count form, so this is a count routing: the scalable plan routes with the same counts.

#include <lrmoe/plugin.hpp>

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace {

// Where each expert's instances are, as hosts: a host is an (expert, rank) with an instance of
// the expert on the rank. An expert's hosts are consecutive, in the order of its instances (each
// rank once), experts in order; so a rank's hosts, listed in host order, are in expert order.
// Flat lists, not a list per expert or an [experts * ranks] table: a layer's routing builds
// them anew twice a step, and at 64 ranks the table's clearing and the lists' allocations were
// most of the routing's time in profiles.
struct ExpertHosts {
  std::vector<size_t> first;          // [experts + 1] each expert's hosts: [first[e], first[e+1])
  std::vector<int64_t> expert;        // [hosts]
  std::vector<int64_t> rank;          // [hosts]
  std::vector<int64_t> instance;      // [hosts] the instance that takes the rank's pairs
  std::vector<size_t> first_on_rank;  // [ranks + 1] each rank's hosts in `on_rank`
  std::vector<size_t> on_rank;        // [hosts] host indices by rank, each rank's by expert
  size_t experts() const { return first.size() - 1; }
  size_t count(size_t e) const { return first[e + 1] - first[e]; }
};

// Per rank, the host of one expert there (-1: none), set for one expert at a time and cleared
// after it: the lookup an [experts * ranks] table gave, in the expert's hosts' time.
class HostOnRank {
 public:
  explicit HostOnRank(size_t ranks) : host_(ranks, -1) {}
  void set(const ExpertHosts& hosts, size_t e) { mark(hosts, e, true); }
  void clear(const ExpertHosts& hosts, size_t e) { mark(hosts, e, false); }
  int64_t operator[](size_t rank) const { return host_[rank]; }

 private:
  void mark(const ExpertHosts& hosts, size_t e, bool on) {
    for (size_t k = hosts.first[e]; k < hosts.first[e + 1]; ++k)
      host_[static_cast<size_t>(hosts.rank[k])] = on ? static_cast<int64_t>(k) : -1;
  }
  std::vector<int64_t> host_;
};

// Flows of pairs from experts to the ranks that host them, within per-rank limits: one flow per
// host.
class ExpertRankFlow {
 public:
  ExpertRankFlow(std::vector<int64_t> supply, const ExpertHosts& hosts, std::vector<int64_t> limit)
      : hosts_(&hosts),
        experts_(supply.size()),
        ranks_(limit.size()),
        limit_(std::move(limit)),
        flow_(hosts.rank.size(), 0),
        load_(ranks_, 0),
        supply_(supply),
        unplaced_(std::move(supply)) {}

  // Raises the ranks' limits to `limit` (none lower): the flow so far stays within them.
  void raise_limits(std::vector<int64_t> limit) { limit_ = std::move(limit); }
  // Empties the flow, under the limits `limit`: as a flow made afresh, in the storage it has.
  void restart(std::vector<int64_t> limit) {
    limit_ = std::move(limit);
    std::fill(flow_.begin(), flow_.end(), 0);
    std::fill(load_.begin(), load_.end(), 0);
    unplaced_ = supply_;
  }

  // Adds `pairs` of the host's expert to its rank as far as the rank's limit allows.
  void place(size_t host, int64_t pairs) {
    const auto expert = static_cast<size_t>(hosts_->expert[host]);
    const auto rank = static_cast<size_t>(hosts_->rank[host]);
    const int64_t moved = std::min({pairs, unplaced_[expert], limit_[rank] - load_[rank]});
    if (moved <= 0) return;
    flow_[host] += moved;
    load_[rank] += moved;
    unplaced_[expert] -= moved;
  }

  // Augments along shortest residual paths until every pair is placed or none can be; returns
  // whether every pair is placed. A path starts at an expert with unplaced pairs, alternates
  // expert -> hosting rank (always open) and rank -> expert (undoing flow that expert sends
  // there), and ends at a rank below its limit.
  bool complete() {
    const size_t E = experts_;
    const ExpertHosts& hosts = *hosts_;
    // Nodes 0..E-1 are experts, E..E+R-1 ranks; parent[v] is where the path came from, and
    // via[v] the host (the edge) it came along. The queue is a vector read from `head`: every
    // node enters it at most once per search.
    std::vector<int64_t>& parent = parent_;
    parent.resize(E + ranks_);
    std::vector<size_t>& via = via_;
    via.resize(E + ranks_);
    std::vector<size_t>& queue = queue_;
    queue.reserve(E + ranks_);
    // Paths of one edge first, without a search each. The search finds them first anyway: it
    // looks at every starting expert's ranks before any rank's experts, so it takes the lowest
    // expert with a rank below its limit, that expert's first such rank. Placing them only
    // takes room, so no path of one edge opens later: this loop takes the same paths in the
    // same order, and the searches below only the longer ones.
    for (size_t e = 0; e < E; ++e) {
      for (size_t k = hosts.first[e]; k < hosts.first[e + 1]; ++k) place(k, unplaced_[e]);
    }
    for (;;) {
      std::fill(parent.begin(), parent.end(), -1);
      queue.clear();
      for (size_t e = 0; e < E; ++e) {
        if (unplaced_[e] > 0) {
          parent[e] = static_cast<int64_t>(e);
          queue.push_back(e);
        }
      }
      if (queue.empty()) return true;
      int64_t end = -1;
      for (size_t head = 0; head < queue.size() && end < 0; ++head) {
        const size_t node = queue[head];
        if (node < E) {
          for (size_t k = hosts.first[node]; k < hosts.first[node + 1]; ++k) {
            const auto r = static_cast<size_t>(hosts.rank[k]);
            const size_t rank = E + r;
            if (parent[rank] >= 0) continue;
            parent[rank] = static_cast<int64_t>(node);
            via[rank] = k;
            if (load_[r] < limit_[r]) {
              end = static_cast<int64_t>(rank);
              break;
            }
            queue.push_back(rank);
          }
        } else {
          const size_t r = node - E;
          // Only the experts the rank hosts can send it pairs.
          for (size_t j = hosts.first_on_rank[r]; j < hosts.first_on_rank[r + 1]; ++j) {
            const size_t k = hosts.on_rank[j];
            const auto e = static_cast<size_t>(hosts.expert[k]);
            if (parent[e] < 0 && flow_[k] > 0) {
              parent[e] = static_cast<int64_t>(node);
              via[e] = k;
              queue.push_back(e);
            }
          }
        }
      }
      if (end < 0) return false;
      // The bottleneck: the end rank's room, the flows undone, the start expert's unplaced pairs.
      const auto end_rank = static_cast<size_t>(end) - E;
      int64_t amount = limit_[end_rank] - load_[end_rank];
      size_t node = static_cast<size_t>(end);
      while (true) {
        const auto expert = static_cast<size_t>(parent[node]);
        if (parent[expert] == static_cast<int64_t>(expert)) {
          amount = std::min(amount, unplaced_[expert]);
          break;
        }
        amount = std::min(amount, flow_[via[expert]]);
        node = static_cast<size_t>(parent[expert]);
      }
      node = static_cast<size_t>(end);
      load_[end_rank] += amount;
      while (true) {
        const auto expert = static_cast<size_t>(parent[node]);
        flow_[via[node]] += amount;
        if (parent[expert] == static_cast<int64_t>(expert)) {
          unplaced_[expert] -= amount;
          break;
        }
        flow_[via[expert]] -= amount;
        node = static_cast<size_t>(parent[expert]);
      }
    }
  }

  // After complete() failed: the experts its last search reached from those with unplaced pairs
  // (their pairs in all) and the ranks it reached, every one at its limit and loaded by those
  // experts alone, which host nowhere else. Those experts' pairs cannot fit until those ranks
  // hold more: a set that breaks Hall's condition.
  struct Blocked {
    int64_t pairs = 0;
    std::vector<int64_t> ranks;
  };
  Blocked blocked() const {
    Blocked b;
    for (size_t e = 0; e < experts_; ++e)
      if (parent_[e] >= 0) b.pairs += supply_[e];
    for (size_t r = 0; r < ranks_; ++r)
      if (parent_[experts_ + r] >= 0) b.ranks.push_back(static_cast<int64_t>(r));
    return b;
  }

  // [hosts] pairs placed.
  std::vector<int64_t> flow() && { return std::move(flow_); }

 private:
  const ExpertHosts* hosts_;
  size_t experts_, ranks_;
  std::vector<int64_t> limit_;     // [ranks] pairs each may hold
  std::vector<int64_t> flow_;      // [hosts] pairs placed
  std::vector<int64_t> load_;      // [ranks] pairs placed
  std::vector<int64_t> supply_;    // [experts] pairs in all
  std::vector<int64_t> unplaced_;  // [experts]
  std::vector<int64_t> parent_;    // the last search's: where each node was reached from, or -1
  std::vector<size_t> via_;        // the last search's: the host each node was reached along
  std::vector<size_t> queue_;      // the last search's nodes, kept for the next one's storage
};

// The smallest shift s at which `ranks` (a subset of them) can hold `demand` pairs between
// them, each at most max(0, capacity + s): a bound below every feasible shift, since the pairs
// of experts hosted only there must fit there. `low` must hold too few, `high` enough.
int64_t least_shift_holding(const std::vector<int64_t>& capacity, const std::vector<int64_t>& ranks,
                            int64_t demand, int64_t low, int64_t high) {
  while (high - low > 1) {
    const int64_t middle = low + (high - low) / 2;
    int64_t room = 0;
    for (const int64_t r : ranks)
      room += std::max<int64_t>(0, capacity[static_cast<size_t>(r)] + middle);
    (room >= demand ? high : low) = middle;
  }
  return high;
}

ExpertHosts expert_hosts(const std::vector<lrmoe::ExpertInstance>& instances,
                         const std::vector<std::vector<int64_t>>& expert_instances, size_t ranks) {
  const size_t E = expert_instances.size();
  ExpertHosts hosts;
  hosts.first.reserve(E + 1);
  hosts.expert.reserve(instances.size());
  hosts.rank.reserve(instances.size());
  hosts.instance.reserve(instances.size());
  // The last expert (plus one) seen on each rank: an expert's second instance on a rank is no
  // second host.
  std::vector<size_t> seen(ranks, 0);
  hosts.first_on_rank.assign(ranks + 1, 0);
  for (size_t e = 0; e < E; ++e) {
    hosts.first.push_back(hosts.rank.size());
    for (const int64_t instance : expert_instances[e]) {
      const int64_t rank = instances[static_cast<size_t>(instance)].rank;
      if (std::exchange(seen[static_cast<size_t>(rank)], e + 1) == e + 1) continue;
      hosts.expert.push_back(static_cast<int64_t>(e));
      hosts.rank.push_back(rank);
      hosts.instance.push_back(instance);
      ++hosts.first_on_rank[static_cast<size_t>(rank) + 1];
    }
  }
  hosts.first.push_back(hosts.rank.size());
  // Each rank's hosts in host order, so by expert: a counting sort.
  std::partial_sum(hosts.first_on_rank.begin(), hosts.first_on_rank.end(),
                   hosts.first_on_rank.begin());
  hosts.on_rank.resize(hosts.rank.size());
  std::vector<size_t> next(hosts.first_on_rank.begin(), hosts.first_on_rank.end() - 1);
  for (size_t k = 0; k < hosts.rank.size(); ++k)
    hosts.on_rank[next[static_cast<size_t>(hosts.rank[k])]++] = k;
  return hosts;
}

// Steps 1 and 2: [hosts] the pairs each host's rank takes of its expert, from the pairs per
// home rank and expert, `at_home` [ranks * experts].
std::vector<int64_t> transport(const std::vector<int64_t>& at_home, const ExpertHosts& hosts,
                               const std::vector<int64_t>& capacity) {
  const size_t E = hosts.experts();
  const size_t R = capacity.size();
  std::vector<int64_t> supply(E, 0);
  for (size_t h = 0; h < R; ++h) {
    for (size_t e = 0; e < E; ++e) supply[e] += at_home[h * E + e];
  }
  const int64_t total = std::accumulate(supply.begin(), supply.end(), int64_t{0});
  if (total == 0) return std::vector<int64_t>(hosts.rank.size(), 0);
  // The experts by their hosts, fewer first, equal by index: a pass per count, where a stable
  // sort took a buffer of its own; experts have a few hosts.
  std::vector<size_t> order;
  order.reserve(E);
  size_t most_hosts = 0;
  for (size_t e = 0; e < E; ++e) most_hosts = std::max(most_hosts, hosts.count(e));
  for (size_t count = 0; count <= most_hosts; ++count)
    for (size_t e = 0; e < E; ++e)
      if (hosts.count(e) == count) order.push_back(e);

  // Each rank's limit at shift s.
  auto limits_at = [&](int64_t shift) {
    std::vector<int64_t> limit(R);
    for (size_t r = 0; r < R; ++r) limit[r] = std::max<int64_t>(0, capacity[r] + shift);
    return limit;
  };
  // Step 2 into an empty flow: its start, which complete() then finishes.
  auto start = [&](ExpertRankFlow& flow) {
    for (const size_t e : order) {
      for (size_t k = hosts.first[e]; k < hosts.first[e + 1]; ++k)
        flow.place(k, at_home[static_cast<size_t>(hosts.rank[k]) * E + e]);
    }
  };

  // Step 1: the smallest feasible shift. Feasibility only grows with s, so it is one number
  // however it is found. At s = all pairs - min capacity every rank can hold them all. The
  // search starts from a shift no feasible one is below: every rank must hold all pairs between
  // them, and each rank the pairs of the experts hosted on it alone (Hall's condition for the
  // whole and for each rank). It raises the shift while the flow there is short, each time to
  // the least shift at which the set of experts its last search was blocked by could fit on the
  // ranks it reached: a bound below every feasible shift, above the one tried. Raising the
  // limits keeps the flow so far, so each round only augments what is missing. The bound per
  // rank is often the least shift itself: the first flow then completes and is the routing. From
  // the bound of all ranks together, a routing of Qwen3-30B-A3B's replay on 16 ranks took 4.8
  // flows on average, the last one afresh every time; from both bounds, 3.1.
  const auto [least, most] = std::minmax_element(capacity.begin(), capacity.end());
  const int64_t high = total - *least;
  std::vector<int64_t> every_rank(R);
  std::iota(every_rank.begin(), every_rank.end(), 0);
  int64_t first = least_shift_holding(capacity, every_rank, total, -*most - 1, high);
  std::vector<int64_t> hosted_alone(R, 0);  // [ranks] pairs of the experts only this rank hosts
  for (size_t e = 0; e < E; ++e)
    if (hosts.count(e) == 1)
      hosted_alone[static_cast<size_t>(hosts.rank[hosts.first[e]])] += supply[e];
  for (size_t r = 0; r < R; ++r)
    if (hosted_alone[r] > 0) first = std::max(first, hosted_alone[r] - capacity[r]);
  int64_t shift = first;
  ExpertRankFlow search(supply, hosts, limits_at(shift));
  start(search);
  bool complete = false;
  while (shift < high && !(complete = search.complete())) {
    const ExpertRankFlow::Blocked blocked = search.blocked();
    shift = blocked.ranks.empty()
                ? high
                : least_shift_holding(capacity, blocked.ranks, blocked.pairs, shift, high);
    search.raise_limits(limits_at(shift));
  }
  // Step 2 at that shift, from its own start: the routing does not depend on the search. A
  // search that fit at its first shift already is that flow (the common case: room to spare).
  // Else the search's flow starts again, in its storage.
  if (!complete || shift != first) {
    search.restart(limits_at(shift));
    start(search);
    if (!search.complete())
      throw std::logic_error("capacity_aware: no routing at the feasible shift");
  }
  return std::move(search).flow();
}

// The first of an expert's hosts from `k` on, up to `end`, whose flow still takes pairs. The flow
// places every pair, so one is found; were it short, the pairs would go to the next expert's
// hosts, which the loop refuses instead.
size_t with_flow_left(const std::vector<int64_t>& flow, size_t k, size_t end) {
  while (k < end && flow[k] == 0) ++k;
  if (k == end) throw std::logic_error("capacity_aware: the flow placed fewer pairs than routed");
  return k;
}

void check_capacity(const std::vector<int64_t>& capacity, int64_t ranks) {
  if (static_cast<int64_t>(capacity.size()) != ranks) {
    throw std::invalid_argument("capacity_aware routing needs one capacity per rank, got " +
                                std::to_string(capacity.size()) + " for " + std::to_string(ranks) +
                                " ranks");
  }
}

class CapacityAware : public lrmoe::CountRoutingPolicy {
 public:
  explicit CapacityAware(const lrmoe::Parameters&) {}

  at::Tensor route(const lrmoe::RoutingRequest& request) override {
    check_capacity(request.capacity, request.ranks);
    const at::Tensor experts = request.experts.contiguous();
    const at::Tensor home_ranks = request.home_ranks.contiguous();
    const int64_t* expert = experts.data_ptr<int64_t>();
    const int64_t* home = home_ranks.data_ptr<int64_t>();
    const size_t E = request.expert_instances.size();
    const auto R = static_cast<size_t>(request.ranks);

    // Per expert: its pairs; and pairs per (home rank, expert).
    std::vector<std::vector<int64_t>> pairs_of(E);
    std::vector<int64_t> at_home(R * E, 0);
    for (int64_t i = 0; i < experts.numel(); ++i) {
      const auto e = static_cast<size_t>(expert[i]);
      pairs_of[e].push_back(i);
      ++at_home[static_cast<size_t>(home[i]) * E + e];
    }
    const ExpertHosts hosts = expert_hosts(request.instances, request.expert_instances, R);
    std::vector<int64_t> flow = transport(at_home, hosts, request.capacity);

    // Step 3.
    at::Tensor routed = at::empty({experts.numel()}, at::kLong);
    int64_t* chosen = routed.data_ptr<int64_t>();
    std::vector<int64_t> later;
    HostOnRank host_on(R);
    for (size_t e = 0; e < E; ++e) {
      host_on.set(hosts, e);
      later.clear();
      for (const int64_t pair : pairs_of[e]) {
        const int64_t k = host_on[static_cast<size_t>(home[pair])];
        if (k >= 0 && flow[static_cast<size_t>(k)] > 0) {
          --flow[static_cast<size_t>(k)];
          chosen[pair] = hosts.instance[static_cast<size_t>(k)];
        } else {
          later.push_back(pair);
        }
      }
      host_on.clear(hosts, e);
      size_t k = hosts.first[e];
      for (const int64_t pair : later) {
        k = with_flow_left(flow, k, hosts.first[e + 1]);
        --flow[k];
        chosen[pair] = hosts.instance[k];
      }
    }
    return routed;
  }

  // Step 3 in counts. An expert's pairs are in home-rank order (Note [Pair order]), so the pairs
  // that do not stay home fill the ranks in instance order home by home.
  std::vector<int64_t> route_counts(const lrmoe::CountRoutingRequest& request) override {
    check_capacity(request.capacity, request.ranks);
    const auto E = static_cast<size_t>(request.num_experts);
    const auto R = static_cast<size_t>(request.ranks);
    const size_t I = request.instances.size();
    if (request.expert_instances.size() != E || request.pairs.size() != R * E)
      throw std::invalid_argument("capacity_aware: a count request of " +
                                  std::to_string(request.pairs.size()) + " pairs and " +
                                  std::to_string(request.expert_instances.size()) +
                                  " experts' instances for " + std::to_string(R) + " ranks and " +
                                  std::to_string(E) + " experts");
    const std::vector<int64_t>& at_home = request.pairs;  // [ranks * experts]
    const ExpertHosts hosts = expert_hosts(request.instances, request.expert_instances, R);
    std::vector<int64_t> flow = transport(at_home, hosts, request.capacity);

    std::vector<int64_t> routed(R * I, 0);
    std::vector<int64_t> later(R);
    HostOnRank host_on(R);
    for (size_t e = 0; e < E; ++e) {
      if (hosts.count(e) == 1) {
        // One rank hosts the expert: the flow takes every pair there, wherever it lives.
        const auto instance = static_cast<size_t>(hosts.instance[hosts.first[e]]);
        for (size_t h = 0; h < R; ++h) routed[h * I + instance] = at_home[h * E + e];
        continue;
      }
      host_on.set(hosts, e);
      for (size_t h = 0; h < R; ++h) {
        const int64_t pairs = at_home[h * E + e];
        const int64_t k = host_on[h];
        const int64_t stay = k >= 0 ? std::min(pairs, flow[static_cast<size_t>(k)]) : 0;
        if (stay > 0) {
          routed[h * I + static_cast<size_t>(hosts.instance[static_cast<size_t>(k)])] += stay;
          flow[static_cast<size_t>(k)] -= stay;
        }
        later[h] = pairs - stay;
      }
      host_on.clear(hosts, e);
      size_t k = hosts.first[e];
      for (size_t h = 0; h < R; ++h) {
        while (later[h] > 0) {
          k = with_flow_left(flow, k, hosts.first[e + 1]);
          const int64_t moved = std::min(later[h], flow[k]);
          routed[h * I + static_cast<size_t>(hosts.instance[k])] += moved;
          flow[k] -= moved;
          later[h] -= moved;
        }
      }
    }
    return routed;
  }
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<CapacityAware>(
      "capacity_aware", "2.1.0",
      "each pair to an instance of its expert so that the rank with the least room keeps the "
      "most; within capacity whenever any routing is",
      {}, lrmoe::TensorPlace::Host);
}

}  // namespace

LRMOE_PLUGIN(describe)
