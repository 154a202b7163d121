#pragma once
// The weights of the experts a process computes but does not hold, fetched from their homes for
// one pass, and their gradients sent back (core/pipeline/expert_fetch_plan.hpp): one
// all-to-all-v each way over c10d, carrying the needed experts only.

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <vector>

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

// Replica gradients on their way home (Note [Overlapped expert fetch]): a layer's backward
// starts the return of its fetched experts' gradients and goes on to the layers below it; the
// trainer finishes them all, each added into its home experts' gradients, before the gradients
// are summed and clipped.
class GradientReturns {
 public:
  // Waits for every return started since the last call, in the order they started, and adds
  // each into its home matrices' gradients.
  void finish();
  bool empty() const { return pending_.empty(); }
  // A return started: `finish` waits for it and adds it.
  void add(std::function<void()> finish) { pending_.push_back(std::move(finish)); }

 private:
  std::vector<std::function<void()>> pending_;
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
//
// With `returns`, the backward starts the gradients' return and queues it there instead of
// waiting for it: autograd gives the home tensors no gradient from here, and
// GradientReturns::finish adds it into their .grad (they must be leaves: the parameters).
FetchedExperts fetch_experts(const torch::Tensor& home_gate_up, const torch::Tensor& home_down,
                             std::shared_ptr<const ExpertFetchPlan> plan,
                             std::shared_ptr<Collectives> collectives,
                             torch::ScalarType compute_dtype, ExchangeMeasurement* tally = nullptr,
                             std::shared_ptr<GradientReturns> returns = nullptr);

}  // namespace lrmoe
