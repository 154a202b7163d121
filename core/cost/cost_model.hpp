#pragma once
// The modeled cluster time of one MoE layer's forward-backward pass under a hardware profile:
// each rank's expert GEMMs with the profile's throughput and efficiency curve, and every
// collective the pipeline performs, over the profile's links (Note [Cost model] in
// docs/notes.md). It is a pure function of the routing and the profile: two runs that route
// alike are modeled alike, whatever the machine they ran on.

#include <cstdint>
#include <utility>
#include <vector>

#include "core/config/cluster_config.hpp"
#include "core/cost/hardware_profile.hpp"

namespace lrmoe {

// Bytes each rank sends to each other rank in one point-to-point exchange: [from * ranks + to].
struct TrafficMatrix {
  int64_t ranks = 0;
  std::vector<double> bytes;

  explicit TrafficMatrix(int64_t ranks = 0);
  double& at(int64_t from, int64_t to) {
    return bytes[static_cast<std::size_t>(from * ranks + to)];
  }
  double at(int64_t from, int64_t to) const {
    return bytes[static_cast<std::size_t>(from * ranks + to)];
  }
  // The rows of a rank matrix `rows` [ranks * ranks] (rows from rank s to rank d at
  // [s * ranks + d]) times `row_bytes`, transposed for a return trip; a rank's rows to itself
  // move nothing.
  static TrafficMatrix of_rows(const std::vector<int64_t>& rows, int64_t ranks, double row_bytes,
                               bool transpose = false);
};

// What the modeled cluster does beside its hardware: settings of the experiment, not the profile.
struct CostOptions {
  AllToAllAlgorithm all_to_all = AllToAllAlgorithm::Flat;
};

// Expert GEMM shapes of one MoE layer.
struct ExpertShape {
  int64_t hidden = 0;
  int64_t ffn = 0;
};

// The modeled seconds of one pass, by part. Compute is the slowest rank's in each phase
// (forward, backward): the all-to-alls between them synchronise the ranks.
struct ModeledTime {
  double forward_compute = 0;
  double backward_compute = 0;
  // forward dispatch and combine, backward dispatch (one call: Note [Fused dispatch]) and return
  double all_to_all = 0;
  double gathers = 0;  // the plan's own collectives (core/pipeline/plan_collectives.cpp)
  // parameter transfers: replica weights out (with any owner that moved since the previous
  // pass) and replica gradients back; with the optimizer state in host memory, also the step's
  // gradients down to the host and updated weights up (Note [Optimizer state in host memory])
  double replicas = 0;
  // Of the above, the seconds hidden behind compute: all-to-all that ran while chunks computed
  // (Note [Chunked exchange]), a fetch placed ahead behind the previous layer's forward and a
  // deferred gradient return behind the layer below's backward (Note [Overlapped expert fetch]).
  double overlapped = 0;
  // Of `overlapped`, the parameter transfers' part (the fetches placed ahead and the deferred
  // returns); the rest is all-to-all.
  double hidden_transfers = 0;

  double compute() const { return forward_compute + backward_compute; }
  double communication() const { return all_to_all + gathers + replicas; }
  double total() const { return compute() + communication() - overlapped; }
  // A parameter transfer's seconds hidden behind compute: part of `overlapped`, and of its
  // transfers' part.
  void hide_transfer(double seconds) {
    overlapped += seconds;
    hidden_transfers += seconds;
  }
  ModeledTime& operator+=(const ModeledTime& other);
};

class CostModel {
 public:
  CostModel() = default;
  explicit CostModel(HardwareProfile profile, CostOptions options = {})
      : profile_(std::move(profile)), options_(options) {}

  const HardwareProfile& profile() const { return profile_; }
  const CostOptions& options() const { return options_; }
  int64_t element_bytes() const { return profile_.element_bytes; }

  // One GEMM [m, k] x [k, n]: its FLOPs at the efficiency of m rows, or its operands and result
  // through memory, whichever is slower (roofline).
  double gemm_seconds(int64_t m, int64_t k, int64_t n) const;
  // One instance's expert GEMMs over `rows` pairs: forward (gate-up and down projections).
  double expert_forward_seconds(const ExpertShape& shape, int64_t rows) const;
  // Its backward over `kept` pairs (weight gradients; input gradients for `input_rows` pairs,
  // and the gate-up projection again for `recomputed` pairs).
  double expert_backward_seconds(const ExpertShape& shape, int64_t kept, int64_t input_rows,
                                 int64_t recomputed) const;

  // A point-to-point exchange (all-to-all-v, broadcast, reduce): every rank's messages to its
  // peers on its node and on other nodes go out at once over the two links; it ends when the
  // slowest rank's busiest link does.
  double exchange_seconds(const TrafficMatrix& traffic) const;
  // One all-to-all-v call of the pipeline, by the options' algorithm: flat, one exchange;
  // hierarchical, an exchange within the nodes, then one across them between ranks of one local
  // index.
  double all_to_all_seconds(const TrafficMatrix& traffic) const;
  // The two stages of a hierarchical all-to-all of `traffic`: within the nodes (every row to a
  // rank on its own node: its destination, or the relay of the destination's local index), then
  // across them (relay to destination).
  std::pair<TrafficMatrix, TrafficMatrix> hierarchical_stages(const TrafficMatrix& traffic) const;
  // The bytes of `traffic` between ranks on different nodes.
  double cross_node_bytes(const TrafficMatrix& traffic) const;
  // A ring all-gather where rank r contributes contribution[r] bytes.
  double all_gather_seconds(const std::vector<double>& contribution) const;
  // An all-reduce of `bytes` on each of `ranks` ranks: the faster of a ring and a tree.
  double all_reduce_seconds(double bytes, int64_t ranks) const;
  // `bytes` between one rank's host memory and its device, one direction (PCIe).
  double host_link_seconds(double bytes) const;

 private:
  bool same_node(int64_t a, int64_t b) const;
  // The link a ring over `ranks` ranks is bounded by: between nodes when it spans several.
  bool ring_crosses_nodes(int64_t ranks) const;

  HardwareProfile profile_;
  CostOptions options_;
};

// One phase of a chunked pass (Note [Chunked exchange]): chunk c's rows go out (dispatch[c]),
// compute (compute[c]) and come back (back[c]); the link carries one transfer at a time, in the
// order the pass issues them (dispatch 0, dispatch 1, back 0, dispatch 2, back 1, ...), and a
// chunk computes once its rows have arrived and the chunk before it has computed. Returns when
// the last return ends; with one chunk, the sum of the three.
double chunked_phase_seconds(const std::vector<double>& dispatch,
                             const std::vector<double>& compute, const std::vector<double>& back);

// The profile `profile` names (cluster.profile): a file by name or path, or this machine probed
// now for `ranks` ranks.
HardwareProfile resolve_hardware_profile(const std::string& profile, int64_t ranks);

}  // namespace lrmoe
