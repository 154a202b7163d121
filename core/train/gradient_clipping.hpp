#pragma once
// Gradient clipping by global L2 norm that leaves the norm on the device. LibTorch's
// clip_grad_norm_ returns it as a double, which makes the host wait for the whole backward at
// every step; the trainer reads this one a step late instead (Note [Device timing]).

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace lrmoe {

// Scales the gradients of `parameters` by min(1, max_norm / (norm + 1e-6)), where norm is the
// L2 norm of all of them together (as clip_grad_norm_ does; an infinite max_norm leaves them as
// they are). Returns that norm before clipping: [] float32 on the gradients' device (0 on the
// CPU when no parameter has a gradient).
torch::Tensor clip_gradient_norm(const std::vector<torch::Tensor>& parameters, double max_norm);

// The same over a model whose `sharded` parameters differ from process to process (each holds
// its own experts) while the `replicated` ones are the same everywhere: the norm is that of every
// process's parameters together, the sharded ones' squares summed over the processes by
// `sum_over_processes` (in place; every process calls it), the replicated ones counted once.
torch::Tensor clip_gradient_norm(const std::vector<torch::Tensor>& replicated,
                                 const std::vector<torch::Tensor>& sharded, double max_norm,
                                 const std::function<void(torch::Tensor&)>& sum_over_processes);

}  // namespace lrmoe
