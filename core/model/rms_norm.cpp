#include "core/model/rms_norm.hpp"

namespace lrmoe {

RMSNormImpl::RMSNormImpl(int64_t dim, double eps)
    : weight_(register_parameter("weight", torch::ones({dim}))), eps_(eps) {}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  auto inverse_rms = torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return x * inverse_rms * weight_;
}

}  // namespace lrmoe
