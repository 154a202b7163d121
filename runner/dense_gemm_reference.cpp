#include "dense_gemm_reference.hpp"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include "core/device/cuda_runtime.hpp"

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
  if (device_.is_cuda()) {
    torch::mm_out(out_, x_, weight_.t());
    synchronize(device_);
    return;
  }
  const int64_t rows = x_.size(0);
  const int64_t threads = torch::get_num_threads();
  at::parallel_for(0, threads, /*grain_size=*/1, [&](int64_t begin, int64_t end) {
    torch::NoGradGuard worker_no_grad;  // worker threads do not inherit the caller's grad mode
    const int64_t first = rows * begin / threads, last = rows * end / threads;
    auto out_rows = out_.narrow(0, first, last - first);
    torch::mm_out(out_rows, x_.narrow(0, first, last - first), weight_.t());
  });
}

std::string DenseGemmReference::description() const {
  return device_.is_cuda() ? std::string()
                           : fmt::format(" (rows split over {} threads)", torch::get_num_threads());
}

}  // namespace lrmoe
