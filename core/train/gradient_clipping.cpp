#include "core/train/gradient_clipping.hpp"

#include <cmath>

namespace lrmoe {
namespace {

std::vector<torch::Tensor> gradients_of(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : parameters)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

void scale_to(std::vector<torch::Tensor>& grads, const torch::Tensor& total, double max_norm) {
  if (!std::isfinite(max_norm)) return;
  const torch::Tensor scale = (max_norm / (total + 1e-6)).clamp_max(1.0);
  for (torch::Tensor& grad : grads) grad.mul_(scale);
}

// [] float32: the sum of the gradients' squared norms, on `device` when there are none.
torch::Tensor squared_norm(const std::vector<torch::Tensor>& grads, const torch::Device& device) {
  torch::Tensor total = torch::zeros({}, torch::dtype(torch::kFloat32).device(device));
  for (const torch::Tensor& grad : grads) total = total + grad.norm(2).to(torch::kFloat32).square();
  return total;
}

}  // namespace

torch::Tensor clip_gradient_norm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads = gradients_of(parameters), norms;
  if (grads.empty()) return torch::zeros({}, torch::kFloat32);
  for (const torch::Tensor& grad : grads) norms.push_back(grad.norm(2));
  const torch::Tensor total = norms.size() == 1 ? norms.front() : torch::stack(norms).norm(2);
  scale_to(grads, total, max_norm);
  return total;
}

torch::Tensor clip_gradient_norm(const std::vector<torch::Tensor>& replicated,
                                 const std::vector<torch::Tensor>& sharded, double max_norm,
                                 const std::function<void(torch::Tensor&)>& sum_over_processes) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads = gradients_of(replicated);
  std::vector<torch::Tensor> shard_grads = gradients_of(sharded);
  const torch::Device device = !grads.empty()         ? grads.front().device()
                               : !shard_grads.empty() ? shard_grads.front().device()
                                                      : torch::Device(torch::kCPU);
  // Every process takes part in the sum, whether or not it holds a gradient.
  torch::Tensor shard_total = squared_norm(shard_grads, device);
  sum_over_processes(shard_total);
  const torch::Tensor total = (squared_norm(grads, device) + shard_total).sqrt();
  grads.insert(grads.end(), shard_grads.begin(), shard_grads.end());
  scale_to(grads, total, max_norm);
  return total;
}

}  // namespace lrmoe
