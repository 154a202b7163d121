#include "dense_gemm_reference.hpp"

#include <fmt/format.h>

#include "core/device/cuda_runtime.hpp"
#include "core/system/threads.hpp"

namespace lrmoe {

DenseGemmReference::DenseGemmReference(int64_t rows, int64_t hidden, int64_t ffn,
                                       const torch::Device& device, torch::ScalarType dtype)
    : device_(device) {
  torch::NoGradGuard no_grad;
  const auto options = torch::TensorOptions().device(device).dtype(dtype);
  x_ = torch::randn({rows, hidden}, options);
  weight_ = torch::randn({3 * ffn, hidden}, options);
  out_ = torch::empty({rows, 3 * ffn}, options);
  flops_ = 6.0 * static_cast<double>(rows) * static_cast<double>(hidden) * static_cast<double>(ffn);
}

void DenseGemmReference::run() {
  torch::NoGradGuard no_grad;
  // The expert GEMMs run single-threaded BLAS calls side by side; the reference gets the whole
  // machine in one call instead.
  const bool cpu = !device_.is_cuda();
  if (cpu) set_blas_threads(torch::get_num_threads());
  torch::mm_out(out_, x_, weight_.t());
  if (cpu) set_blas_threads(1);
  synchronize(device_);
}

std::string DenseGemmReference::description() const {
  return device_.is_cuda()
             ? std::string()
             : fmt::format(" (one BLAS call on {} threads)", torch::get_num_threads());
}

}  // namespace lrmoe
