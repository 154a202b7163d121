#include "core/train/gradient_clipping.hpp"

#include <cmath>

namespace lrmoe {

torch::Tensor clip_gradient_norm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads, norms;
  for (const torch::Tensor& p : parameters) {
    if (!p.grad().defined()) continue;
    grads.push_back(p.grad());
    norms.push_back(p.grad().norm(2));
  }
  if (grads.empty()) return torch::zeros({}, torch::kFloat32);
  const torch::Tensor total = norms.size() == 1 ? norms.front() : torch::stack(norms).norm(2);
  if (std::isfinite(max_norm)) {
    const torch::Tensor scale = (max_norm / (total + 1e-6)).clamp_max(1.0);
    for (torch::Tensor& grad : grads) grad.mul_(scale);
  }
  return total;
}

}  // namespace lrmoe
