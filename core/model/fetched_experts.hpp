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

struct FetchedExperts {
  torch::Tensor gate_up;  // [fetched, 2f, h]: plan.fetched's matrices, in its order
  torch::Tensor down;     // [fetched, h, f]
};

// home_gate_up [home experts, 2f, h] and home_down [home experts, h, f]: this process's home
// experts (plan.home). Every process of `collectives` calls it for the same pass, each with its
// own plan: it is a collective, forward and backward. Differentiable: each fetched expert's
// gradient goes back to its home and is added into the home expert's, so an expert's gradient
// sums every process's contributions.
// `tally`, when given, receives each exchange's bytes to and from other processes, its host
// seconds and one call, forward and backward alike.
FetchedExperts fetch_experts(const torch::Tensor& home_gate_up, const torch::Tensor& home_down,
                             std::shared_ptr<const ExpertFetchPlan> plan,
                             std::shared_ptr<Collectives> collectives,
                             ExchangeMeasurement* tally = nullptr);

}  // namespace lrmoe
