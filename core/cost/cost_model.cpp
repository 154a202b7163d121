#include "core/cost/cost_model.hpp"

#include <algorithm>
#include <cmath>

#include "core/cost/machine_probe.hpp"

namespace lrmoe {

TrafficMatrix::TrafficMatrix(int64_t r) : ranks(r), bytes(static_cast<std::size_t>(r * r), 0.0) {}

TrafficMatrix TrafficMatrix::of_rows(const std::vector<int64_t>& rows, int64_t ranks,
                                     double row_bytes, bool transpose) {
  TrafficMatrix t(ranks);
  for (int64_t s = 0; s < ranks; ++s) {
    for (int64_t d = 0; d < ranks; ++d) {
      if (s == d) continue;
      const double bytes =
          static_cast<double>(rows[static_cast<std::size_t>(s * ranks + d)]) * row_bytes;
      (transpose ? t.at(d, s) : t.at(s, d)) += bytes;
    }
  }
  return t;
}

ModeledTime& ModeledTime::operator+=(const ModeledTime& o) {
  forward_compute += o.forward_compute;
  backward_compute += o.backward_compute;
  all_to_all += o.all_to_all;
  gathers += o.gathers;
  replicas += o.replicas;
  overlapped += o.overlapped;
  hidden_transfers += o.hidden_transfers;
  return *this;
}

double chunked_phase_seconds(const std::vector<double>& dispatch,
                             const std::vector<double>& compute, const std::vector<double>& back) {
  double link = 0, computed = 0;  // when each is next free
  double arrived = dispatch.empty() ? 0 : dispatch.front();
  link = arrived;
  for (std::size_t c = 0; c < compute.size(); ++c) {
    const double start = std::max(computed, arrived);
    // The next chunk's dispatch is issued as this chunk starts computing.
    if (c + 1 < compute.size()) arrived = link = std::max(link, start) + dispatch[c + 1];
    computed = start + compute[c];
    link = std::max(link, computed) + back[c];
  }
  return std::max(link, computed);
}

double CostModel::gemm_seconds(int64_t m, int64_t k, int64_t n) const {
  if (m <= 0 || k <= 0 || n <= 0) return 0;
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n);
  const double compute =
      flops / (profile_.peak_flops * profile_.gemm_efficiency_at(static_cast<double>(m)));
  const double bytes =
      static_cast<double>(profile_.element_bytes) * static_cast<double>(m * k + k * n + m * n);
  return std::max(compute, bytes / profile_.memory_bandwidth);
}

double CostModel::expert_forward_seconds(const ExpertShape& s, int64_t rows) const {
  // [rows, h] x [h, 2f] pre-activations, then [rows, f] x [f, h] output.
  return gemm_seconds(rows, s.hidden, 2 * s.ffn) + gemm_seconds(rows, s.ffn, s.hidden);
}

double CostModel::expert_backward_seconds(const ExpertShape& s, int64_t kept, int64_t input_rows,
                                          int64_t recomputed) const {
  // Weight gradients of the kept pairs: the hidden gradient [kept, h] x [h, f], the down and
  // gate-up weight gradients (the pairs are the reduction dimension, the efficiency curve is
  // read at the same row count). Input gradients: [rows, 2f] x [2f, h], with the hidden
  // gradient of rows that were not kept.
  double seconds = gemm_seconds(recomputed, s.hidden, 2 * s.ffn);
  seconds += gemm_seconds(kept, s.hidden, s.ffn);
  if (kept > 0) {
    const double flops = 2.0 * static_cast<double>(kept) * static_cast<double>(s.hidden * s.ffn);
    const double bytes = static_cast<double>(profile_.element_bytes) *
                         static_cast<double>(kept * (s.hidden + 3 * s.ffn) + 3 * s.hidden * s.ffn);
    const double efficiency = profile_.gemm_efficiency_at(static_cast<double>(kept));
    // dW_down [h, f] (FLOPs h f) and dW_gate_up [2f, h] (FLOPs 2 h f) over `kept` pairs.
    seconds += std::max(3.0 * flops / (profile_.peak_flops * efficiency),
                        bytes / profile_.memory_bandwidth);
  }
  if (input_rows > kept) seconds += gemm_seconds(input_rows - kept, s.hidden, s.ffn);
  seconds += gemm_seconds(input_rows, 2 * s.ffn, s.hidden);
  return seconds;
}

bool CostModel::same_node(int64_t a, int64_t b) const {
  return a / profile_.ranks_per_node == b / profile_.ranks_per_node;
}

bool CostModel::ring_crosses_nodes(int64_t ranks) const {
  return ranks > profile_.ranks_per_node;
}

double CostModel::exchange_seconds(const TrafficMatrix& t) const {
  double slowest = 0;
  for (int64_t r = 0; r < t.ranks; ++r) {
    // [0]: peers on r's node, [1]: on other nodes.
    double out[2] = {0, 0}, in[2] = {0, 0};
    int64_t peers_out[2] = {0, 0}, peers_in[2] = {0, 0};
    for (int64_t s = 0; s < t.ranks; ++s) {
      if (s == r) continue;
      const int link = same_node(r, s) ? 0 : 1;
      if (t.at(r, s) > 0) {
        out[link] += t.at(r, s);
        ++peers_out[link];
      }
      if (t.at(s, r) > 0) {
        in[link] += t.at(s, r);
        ++peers_in[link];
      }
    }
    const double bandwidth[2] = {profile_.intra_node_bandwidth, profile_.inter_node_bandwidth};
    const double latency[2] = {profile_.intra_node_latency, profile_.inter_node_latency};
    for (int link = 0; link < 2; ++link) {
      const double seconds =
          static_cast<double>(std::max(peers_out[link], peers_in[link])) * latency[link] +
          std::max(out[link], in[link]) / bandwidth[link];
      slowest = std::max(slowest, seconds);
    }
  }
  return slowest;
}

double CostModel::all_to_all_seconds(const TrafficMatrix& t) const {
  if (options_.all_to_all == AllToAllAlgorithm::Flat || !ring_crosses_nodes(t.ranks))
    return exchange_seconds(t);
  // The second stage needs the first's rows at the relays: one after the other.
  const auto [within, across] = hierarchical_stages(t);
  return exchange_seconds(within) + exchange_seconds(across);
}

std::pair<TrafficMatrix, TrafficMatrix> CostModel::hierarchical_stages(
    const TrafficMatrix& t) const {
  const int64_t per_node = profile_.ranks_per_node;
  TrafficMatrix within(t.ranks), across(t.ranks);
  for (int64_t s = 0; s < t.ranks; ++s) {
    const int64_t node_first = s / per_node * per_node;
    // The last node may hold fewer ranks: a local index it lacks wraps round.
    const int64_t node_size = std::min(per_node, t.ranks - node_first);
    for (int64_t d = 0; d < t.ranks; ++d) {
      const double bytes = t.at(s, d);
      if (s == d || bytes <= 0) continue;
      if (same_node(s, d)) {
        within.at(s, d) += bytes;
        continue;
      }
      const int64_t relay = node_first + (d % per_node) % node_size;
      if (relay != s) within.at(s, relay) += bytes;
      across.at(relay, d) += bytes;
    }
  }
  return {std::move(within), std::move(across)};
}

double CostModel::cross_node_bytes(const TrafficMatrix& t) const {
  double bytes = 0;
  for (int64_t s = 0; s < t.ranks; ++s) {
    for (int64_t d = 0; d < t.ranks; ++d)
      if (!same_node(s, d)) bytes += t.at(s, d);
  }
  return bytes;
}

double CostModel::all_gather_seconds(const std::vector<double>& contribution) const {
  const auto ranks = static_cast<int64_t>(contribution.size());
  if (ranks <= 1) return 0;
  double total = 0, smallest = contribution.front();
  for (double b : contribution) {
    total += b;
    smallest = std::min(smallest, b);
  }
  const bool inter = ring_crosses_nodes(ranks);
  const double bandwidth = inter ? profile_.inter_node_bandwidth : profile_.intra_node_bandwidth;
  const double latency = inter ? profile_.inter_node_latency : profile_.intra_node_latency;
  // R - 1 ring steps; the rank with the smallest share receives the most.
  return static_cast<double>(ranks - 1) * latency + (total - smallest) / bandwidth;
}

double CostModel::all_reduce_seconds(double bytes, int64_t ranks) const {
  if (ranks <= 1) return 0;
  const bool inter = ring_crosses_nodes(ranks);
  const double bandwidth = inter ? profile_.inter_node_bandwidth : profile_.intra_node_bandwidth;
  const double latency = inter ? profile_.inter_node_latency : profile_.intra_node_latency;
  const double r = static_cast<double>(ranks);
  // Ring: reduce-scatter then all-gather, 2 (R - 1) steps of bytes / R each. Tree: up to the
  // root and back down, 2 ceil(log2 R) steps, every byte over a link twice (pipelined). NCCL
  // times both for each call and takes the faster (Note [Cost model]).
  const double ring = 2.0 * (r - 1) * latency + 2.0 * (r - 1) / r * bytes / bandwidth;
  const double tree = 2.0 * std::ceil(std::log2(r)) * latency + 2.0 * bytes / bandwidth;
  return std::min(ring, tree);
}

double CostModel::host_link_seconds(double bytes) const {
  return bytes > 0 ? bytes / profile_.host_link_bandwidth : 0.0;
}

HardwareProfile resolve_hardware_profile(const std::string& profile, int64_t ranks) {
  return profile == kThisMachineProfile ? probe_this_machine(ranks)
                                        : load_hardware_profile(profile, hardware_profile_dirs());
}

}  // namespace lrmoe
