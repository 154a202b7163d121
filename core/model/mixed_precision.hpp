#pragma once
// Parameters are fp32 master weights; every use casts them to the dtype of the activations it
// meets, so that the GEMMs run in the compute dtype and autograd hands fp32 gradients to the
// optimizer (Note [Mixed precision] in docs/notes.md). The activations' dtype is set once, where
// the embedding's output enters the blocks; in fp32 every cast here is a no-op.

#include <torch/torch.h>

namespace lrmoe {

// `parameter` in the dtype of `activations`.
inline torch::Tensor as_compute(const torch::Tensor& parameter, const torch::Tensor& activations) {
  return parameter.to(activations.scalar_type());
}

// layer(x) with the layer's weight and bias cast to x's dtype.
inline torch::Tensor linear(const torch::Tensor& x, const torch::nn::Linear& layer) {
  const torch::Tensor& bias = layer->bias;
  return torch::nn::functional::linear(x, as_compute(layer->weight, x),
                                       bias.defined() ? as_compute(bias, x) : bias);
}

}  // namespace lrmoe
