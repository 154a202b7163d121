#include "core/pipeline/pass_accounting.hpp"

#include <algorithm>
#include <numeric>

#include "core/pipeline/critical_path.hpp"
#include "core/pipeline/exchange_chunks.hpp"
#include "core/pipeline/plan_budget.hpp"
#include "core/pipeline/plan_collectives.hpp"
#include "lrmoe/static_owners.hpp"

namespace lrmoe {
namespace {

TrafficMatrix scaled(TrafficMatrix t, double factor) {
  for (double& bytes : t.bytes) bytes *= factor;
  return t;
}

// Rows each instance has in a layout.
int64_t rows_of(const PairLayout& layout, std::size_t instance) {
  return layout.instance_offsets[instance + 1] - layout.instance_offsets[instance];
}

int64_t chunk_count(const PipelineSettings& settings, const ForwardPass& forward) {
  return forward.instance_chunk.empty() ? 1 : static_cast<int64_t>(settings.exchange_chunks);
}

// [chunk][rank] modeled seconds of each rank's forward expert compute, over its computed pairs.
std::vector<std::vector<double>> forward_seconds(const PipelineSettings& settings,
                                                 const ForwardPass& forward) {
  const InstanceTable& table = *forward.table;
  const int64_t chunks = chunk_count(settings, forward);
  std::vector<std::vector<double>> seconds(
      static_cast<std::size_t>(chunks),
      std::vector<double>(static_cast<std::size_t>(settings.ranks), 0.0));
  const ExpertShape shape{settings.costs.hidden, settings.costs.ffn};
  for (std::size_t i = 0; i < table.instances.size(); ++i) {
    const auto k = static_cast<std::size_t>(chunks > 1 ? forward.instance_chunk[i] : 0);
    seconds[k][static_cast<std::size_t>(table.instance_rank[i])] +=
        settings.cost_model.expert_forward_seconds(shape, rows_of(forward.layout, i));
  }
  return seconds;
}

// The slowest rank of each chunk: the chunk's exchanges synchronise the ranks.
std::vector<double> slowest_ranks(const std::vector<std::vector<double>>& per_chunk) {
  std::vector<double> slowest;
  for (const std::vector<double>& ranks : per_chunk)
    slowest.push_back(*std::max_element(ranks.begin(), ranks.end()));
  return slowest;
}

// One expert's parameters at the cost model's element size (a SwiGLU: gate, up and down
// projections): what a parameter transfer of it moves.
double modeled_expert_bytes(const PipelineSettings& settings) {
  return static_cast<double>(3 * settings.costs.hidden * settings.costs.ffn *
                             settings.cost_model.element_bytes());
}

}  // namespace

PassAccount account_pass(const PipelineSettings& settings, const ForwardPass& forward,
                         const BackwardPass& backward) {
  const PairCosts& c = settings.costs;
  const CostModel& model = settings.cost_model;
  const InstanceTable& table = *forward.table;
  const PairLayout& f = forward.layout;
  const PairLayout& b = backward.layout;
  const int64_t R = settings.ranks;
  const auto r_size = static_cast<std::size_t>(R);
  const bool input_grads_for_all = settings.dropped_pair_keeps == DroppedPairKeeps::InputGrad;
  PassAccount account;

  std::vector<double> forward_load(f.load.begin(), f.load.end()),
      backward_load(b.load.begin(), b.load.end());
  account.holdings = rank_holdings(table, forward_load, backward_load);

  // Kept pairs whose backward instance is on another rank than their forward one take their
  // saved pre-activations along (without recomputation; a rank's pairs to itself move nothing);
  // the input row travels with the gradient row in any case.
  const std::vector<int64_t>& moved = backward.by_forward_rank;

  // The exchanges of the pass, each one all-to-all-v call of one or more messages: (pair
  // matrix, the same per (home rank, instance) for chunks, elements per row, transposed,
  // category). The run's bytes use its element size; the model uses the profile's.
  struct Message {
    const std::vector<int64_t>* pairs;
    const std::vector<int64_t>* home_instance;
    int64_t elements;
    bool back;
    int64_t LayerTraffic::*category;
  };
  const int64_t h = c.hidden, ffn = c.ffn;
  const std::vector<int64_t>*fh = &f.home_instance, *bh = &b.home_instance;
  std::vector<std::vector<Message>> calls = {
      {{&f.matrix, fh, h, false, &LayerTraffic::forward_dispatch}},
      {{&f.matrix, fh, h + 1, true, &LayerTraffic::forward_combine}},  // output row, hidden norm
  };
  // The backward sends everything in one call (Note [Fused dispatch]): the kept pairs' gradient
  // and input rows, their saved pre-activations, and with input gradients for every computed
  // pair, those pairs' gradient rows (and input rows, to recompute) to their forward instance.
  std::vector<Message> backward_out = {
      {&b.matrix, bh, 2 * h, false, &LayerTraffic::backward_dispatch}};
  if (!settings.recompute) {
    backward_out.push_back(
        {&moved, &backward.forward_instance, 2 * ffn, false, &LayerTraffic::backward_dispatch});
  }
  if (input_grads_for_all) {
    backward_out.push_back(
        {&f.matrix, fh, settings.recompute ? 2 * h : h, false, &LayerTraffic::backward_dispatch});
  }
  calls.push_back(backward_out);
  // Input gradients home: every computed pair's, or the kept pairs' own.
  calls.push_back({input_grads_for_all
                       ? Message{&f.matrix, fh, h, true, &LayerTraffic::backward_return}
                       : Message{&b.matrix, bh, h, true, &LayerTraffic::backward_return}});

  account.bytes_sent.assign(r_size, 0);
  account.bytes_received.assign(r_size, 0);
  for (const std::vector<Message>& call : calls) {
    for (const Message& x : call) {
      const TrafficMatrix run_bytes = TrafficMatrix::of_rows(
          *x.pairs, R, static_cast<double>(x.elements * c.element_bytes.activation), x.back);
      account.traffic.cross_node += static_cast<int64_t>(model.cross_node_bytes(run_bytes));
      for (int64_t src = 0; src < R; ++src) {
        for (int64_t d = 0; d < R; ++d) {
          const auto bytes = static_cast<int64_t>(run_bytes.at(src, d));
          account.traffic.*x.category += bytes;
          account.bytes_sent[static_cast<std::size_t>(src)] += bytes;
          account.bytes_received[static_cast<std::size_t>(d)] += bytes;
        }
      }
    }
  }

  // The modeled seconds of each call, [call][chunk]: unchunked one exchange of its messages'
  // summed bytes; chunked (Note [Chunked exchange]), one per chunk over the chunk's pairs (its
  // instances' pairs, by the forward's chunk of each instance).
  const int64_t chunks = chunk_count(settings, forward);
  std::vector<std::vector<double>> call_seconds;
  for (const std::vector<Message>& call : calls) {
    std::vector<double>& seconds = call_seconds.emplace_back();
    for (int64_t k = 0; k < chunks; ++k) {
      TrafficMatrix elements(R);
      for (const Message& x : call) {
        const std::vector<int64_t> in_chunk =
            chunks == 1 ? std::vector<int64_t>()
                        : chunk_matrix(*x.home_instance, table, forward.instance_chunk, k, R);
        const TrafficMatrix part = TrafficMatrix::of_rows(chunks == 1 ? *x.pairs : in_chunk, R,
                                                          static_cast<double>(x.elements), x.back);
        for (std::size_t j = 0; j < part.bytes.size(); ++j) elements.bytes[j] += part.bytes[j];
      }
      seconds.push_back(
          model.all_to_all_seconds(scaled(elements, static_cast<double>(model.element_bytes()))));
      account.modeled.all_to_all += seconds.back();
    }
  }

  // Parameter transfers (Note [Cost model]): an expert's parameters from its home, the rank of
  // its static owner, where its master weights and optimizer state live, out to every other rank
  // that hosts an instance of it, owner or replica, and the gradients back, once per rank (a
  // second instance on that rank copies locally or shares the copy).
  TrafficMatrix replica_out(R), replica_back(R), replica_run_bytes(R);
  const double model_expert_bytes = modeled_expert_bytes(settings);
  for (int64_t e = 0; e < table.num_experts(); ++e) {
    const int64_t home = static_owner(e, table.num_experts(), R).rank;
    std::vector<bool> reached(r_size, false);
    reached[static_cast<std::size_t>(home)] = true;
    for (const int64_t instance : table.instances_of(e)) {
      const int64_t rank = table.instance_rank[static_cast<std::size_t>(instance)];
      if (reached[static_cast<std::size_t>(rank)]) continue;
      reached[static_cast<std::size_t>(rank)] = true;
      account.traffic.replica_sync += 2 * c.expert_bytes;
      replica_run_bytes.at(home, rank) += static_cast<double>(2 * c.expert_bytes);
      replica_out.at(home, rank) += model_expert_bytes;
      replica_back.at(rank, home) += model_expert_bytes;
    }
  }
  // Point to point from each home: over the link between the two ranks, whatever the
  // all-to-all's algorithm. A fetch placed before the router travels behind the previous MoE
  // layer's forward compute (Note [Overlapped expert fetch]).
  const double fetch = model.exchange_seconds(replica_out);
  account.modeled_return = model.exchange_seconds(replica_back);
  account.modeled.replicas = fetch + account.modeled_return;
  if (forward.fetch_cover_seconds) {
    account.modeled.hide_transfer(std::min(fetch, *forward.fetch_cover_seconds));
  }
  account.traffic.cross_node += static_cast<int64_t>(model.cross_node_bytes(replica_run_bytes));

  account.plan = plan_collectives(settings, forward, backward);
  account.modeled.gathers = account.plan.seconds;

  // Compute: each rank's instances, forward over their computed pairs, backward over their kept
  // pairs (and input gradients for every computed pair when dropped pairs keep them); per chunk
  // the slowest rank, as the chunk's exchanges synchronise the ranks.
  const ExpertShape shape{h, ffn};
  std::vector<std::vector<double>> phase_seconds[kPhases] = {
      // [phase][chunk][rank]
      forward_seconds(settings, forward),
      std::vector<std::vector<double>>(static_cast<std::size_t>(chunks),
                                       std::vector<double>(r_size, 0.0))};
  for (std::size_t i = 0; i < table.instances.size(); ++i) {
    const auto r = static_cast<std::size_t>(table.instance_rank[i]);
    const auto k = static_cast<std::size_t>(chunks > 1 ? forward.instance_chunk[i] : 0);
    const int64_t computed = rows_of(f, i), kept = rows_of(b, i);
    const int64_t input_rows = input_grads_for_all ? computed : kept;
    int64_t recomputed = 0;
    if (settings.recompute) recomputed = kept + (input_grads_for_all ? computed : 0);
    phase_seconds[kBackwardPhase][k][r] +=
        model.expert_backward_seconds(shape, kept, input_rows, recomputed);
  }
  double* compute[kPhases] = {&account.modeled.forward_compute, &account.modeled.backward_compute};
  for (int phase = 0; phase < kPhases; ++phase) {
    const std::vector<double> slowest = slowest_ranks(phase_seconds[phase]);
    *compute[phase] = std::accumulate(slowest.begin(), slowest.end(), 0.0);
    if (phase == kBackwardPhase) account.backward_cover = *compute[phase];
    if (chunks == 1) continue;
    // Calls 0 and 1 are the forward's dispatch and combine, 2 and 3 the backward's.
    const std::vector<double>& out = call_seconds[static_cast<std::size_t>(2 * phase)];
    const std::vector<double>& back = call_seconds[static_cast<std::size_t>(2 * phase + 1)];
    const double apart = std::accumulate(out.begin(), out.end(), 0.0) + *compute[phase] +
                         std::accumulate(back.begin(), back.end(), 0.0);
    // Never below 0 by rounding: chunks hide, they do not add.
    const double hidden = std::max(0.0, apart - chunked_phase_seconds(out, slowest, back));
    account.modeled.overlapped += hidden;
    if (phase == kBackwardPhase)
      account.backward_cover = std::max(0.0, account.backward_cover - hidden);
  }
  return account;
}

double modeled_host_optimizer_seconds(const PipelineSettings& settings) {
  if (!settings.host_optimizer_state) return 0.0;
  const CostModel& model = settings.cost_model;
  const double share =
      static_cast<double>(owned_experts_per_rank(settings.num_experts, settings.ranks));
  return 2.0 * model.host_link_seconds(share * modeled_expert_bytes(settings));
}

double modeled_fetch_cover(const PipelineSettings& settings, const ForwardPass& forward) {
  if (chunk_count(settings, forward) > 1) return 0;
  const std::vector<double> slowest = slowest_ranks(forward_seconds(settings, forward));
  return std::accumulate(slowest.begin(), slowest.end(), 0.0);
}

}  // namespace lrmoe
