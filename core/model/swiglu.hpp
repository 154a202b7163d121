#pragma once
// A dense SwiGLU feed-forward block: down(silu(gate(x)) * up(x)). Used for the first_k_dense
// layers and for shared experts.

#include <torch/torch.h>

namespace lrmoe {

class SwiGLUImpl : public torch::nn::Module {
 public:
  SwiGLUImpl(int64_t hidden_size, int64_t ffn_size);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t ffn_size_;
  torch::nn::Linear gate_up_{nullptr};  // gate and up projections fused: [2 * ffn, hidden]
  torch::nn::Linear down_{nullptr};
};
TORCH_MODULE(SwiGLU);

}  // namespace lrmoe
