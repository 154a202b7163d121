#pragma once
// Root-mean-square layer norm (no mean subtraction, no bias), as in Qwen3 and GLM-4.5.

#include <torch/torch.h>

namespace lrmoe {

class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  // Normalises over the last dimension.
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor weight_;
  double eps_;
};
TORCH_MODULE(RMSNorm);

}  // namespace lrmoe
