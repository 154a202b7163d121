#include "core/system/libtorch_compat.hpp"

#include <stdexcept>

namespace lrmoe::compat {

at::Tensor grouped_mm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& group_ends) {
#if LRMOE_TORCH_AT_LEAST(2, 9)
  return at::_grouped_mm(a, b, group_ends);
#else
  throw std::logic_error("at::_grouped_mm needs LibTorch 2.9 or later; this is " TORCH_VERSION);
#endif
}

}  // namespace lrmoe::compat
