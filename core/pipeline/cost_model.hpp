#pragma once
// The modeled cluster time of one MoE layer's work: each rank's expert GEMM FLOPs at a measured
// (or configured) throughput, plus its all-to-all and replica traffic over links of configured
// bandwidth and latency. The layer takes as long as its slowest rank.

#include <cstdint>

namespace lrmoe {

struct CostModel {
  double flops = 1e12;     // FLOP/s of one rank's expert GEMMs
  double bandwidth = 5e10; // bytes per second a rank sends or receives
  double latency = 5e-6;   // seconds per message

  double compute_seconds(double flops_of_work) const { return flops_of_work / flops; }
  // One all-to-all from one rank's view: a message per peer, and its larger direction over the link.
  double exchange_seconds(double sent_bytes, double received_bytes, int64_t peers) const;
};

}  // namespace lrmoe
