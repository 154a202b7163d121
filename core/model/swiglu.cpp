#include "core/model/swiglu.hpp"

#include "core/model/mixed_precision.hpp"

namespace lrmoe {

SwiGLUImpl::SwiGLUImpl(int64_t hidden_size, int64_t ffn_size) : ffn_size_(ffn_size) {
  using torch::nn::LinearOptions;
  gate_up_ = register_module(
      "gate_up", torch::nn::Linear(LinearOptions(hidden_size, 2 * ffn_size).bias(false)));
  down_ =
      register_module("down", torch::nn::Linear(LinearOptions(ffn_size, hidden_size).bias(false)));
}

torch::Tensor SwiGLUImpl::forward(const torch::Tensor& x) {
  auto gate_up = linear(x, gate_up_);
  auto hidden =
      torch::silu(gate_up.narrow(-1, 0, ffn_size_)) * gate_up.narrow(-1, ffn_size_, ffn_size_);
  return linear(hidden, down_);
}

}  // namespace lrmoe
