#include "core/model/rms_norm.hpp"

namespace lrmoe {

RMSNormImpl::RMSNormImpl(int64_t dim, double eps)
    : weight_(register_parameter("weight", torch::ones({dim}))), eps_(eps) {}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  // In fp32 whatever the compute dtype (Note [Mixed precision]): the mean of squares is a sum.
  const torch::Tensor x32 = x.to(torch::kFloat32);
  auto inverse_rms = torch::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return (x32 * inverse_rms * weight_).to(x.scalar_type());
}

}  // namespace lrmoe
