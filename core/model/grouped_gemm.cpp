#include "core/model/grouped_gemm.hpp"

namespace lrmoe {
namespace {

template <typename Fn>
void for_each_expert_slice(const std::vector<int64_t>& offsets, Fn&& fn) {
  for (size_t e = 0; e + 1 < offsets.size(); ++e) {
    const int64_t count = offsets[e + 1] - offsets[e];
    if (count > 0) fn(static_cast<int64_t>(e), offsets[e], count);
  }
}

}  // namespace

void grouped_mm(const torch::Tensor& input, const std::vector<int64_t>& offsets, const torch::Tensor& weights,
                bool transpose_weights, torch::Tensor& out) {
  for_each_expert_slice(offsets, [&](int64_t e, int64_t first, int64_t count) {
    auto out_slice = out.narrow(0, first, count);
    torch::mm_out(out_slice, input.narrow(0, first, count), transpose_weights ? weights[e].t() : weights[e]);
  });
}

torch::Tensor grouped_weight_grad(const torch::Tensor& grad_out, const torch::Tensor& input,
                                  const std::vector<int64_t>& offsets, const torch::Tensor& like_weights) {
  auto grad = torch::zeros_like(like_weights);
  for_each_expert_slice(offsets, [&](int64_t e, int64_t first, int64_t count) {
    auto grad_e = grad[e];
    torch::mm_out(grad_e, grad_out.narrow(0, first, count).t(), input.narrow(0, first, count));
  });
  return grad;
}

}  // namespace lrmoe
