#pragma once
// The weights of the experts a process computes but does not hold, fetched from their homes for
// one pass, and their gradients sent back (core/pipeline/expert_fetch_plan.hpp): one
// all-to-all-v each way over c10d, carrying the needed experts only.

#include <torch/torch.h>

#include <memory>

#include "core/distributed/collectives.hpp"
#include "core/pipeline/expert_fetch_plan.hpp"
#include "core/pipeline/pair_exchange.hpp"

namespace lrmoe {

// The fetch of one pass under way: the fetched matrices are written when it arrives.
class FetchArrival {
 public:
  // Blocks until the fetched matrices are written; later calls return at once.
  virtual void wait() = 0;
  virtual ~FetchArrival() = default;
};

struct FetchedExperts {
  // [fetched, 2f, h] and [fetched, h, f]: plan.fetched's matrices, in its order, in the compute
  // dtype; their values are there once `arrival` has been waited for.
  torch::Tensor gate_up;
  torch::Tensor down;
  std::shared_ptr<FetchArrival> arrival;  // never null
};

// home_gate_up [home experts, 2f, h] and home_down [home experts, h, f]: this process's home
// experts (plan.home), in their master dtype, which is what travels. Every process of
// `collectives` calls it for the same pass, each with its own plan: it is a collective, forward
// and backward. The exchange is started here and finished by `arrival->wait()`, which the caller
// puts as late as the data allows (Note [Overlapped expert fetch]); collectives issued in between
// run while the experts travel. Differentiable: each fetched expert's gradient goes back to its
// home, in the master dtype, and is added into the home expert's, so an expert's gradient sums
// every process's contributions.
// `tally`, when given, receives each exchange's bytes to and from other processes, its host
// seconds from start to arrival and one call, forward and backward alike.
FetchedExperts fetch_experts(const torch::Tensor& home_gate_up, const torch::Tensor& home_down,
                             std::shared_ptr<const ExpertFetchPlan> plan,
                             std::shared_ptr<Collectives> collectives,
                             torch::ScalarType compute_dtype, ExchangeMeasurement* tally = nullptr);

}  // namespace lrmoe
