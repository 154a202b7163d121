#include "core/system/blas_probe.hpp"

#include <dlfcn.h>

#include <chrono>
#include <filesystem>

#include <torch/torch.h>

namespace lrmoe {
namespace {

std::string library_providing(const char* symbol) {
  void* address = dlsym(RTLD_DEFAULT, symbol);
  Dl_info info{};
  if (!address || !dladdr(address, &info) || !info.dli_fname)
    return "unknown (no " + std::string(symbol) + ")";
  std::error_code error;
  auto resolved = std::filesystem::canonical(info.dli_fname, error);
  return error ? std::string(info.dli_fname) : resolved.string();
}

double measure_matmul_gflops() {
  torch::NoGradGuard no_grad;
  const int64_t n = 512;
  auto a = torch::randn({n, n}, torch::TensorOptions().dtype(torch::kFloat32));
  auto b = torch::randn({n, n}, torch::TensorOptions().dtype(torch::kFloat32));
  auto c = torch::empty({n, n});
  torch::mm_out(c, a, b);  // warm-up: thread pools, page faults
  int iterations = 0;
  const auto started = std::chrono::steady_clock::now();
  double seconds = 0;
  while (seconds < 0.2 || iterations < 3) {
    torch::mm_out(c, a, b);
    ++iterations;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  return 2.0 * n * n * n * iterations / seconds / 1e9;
}

}  // namespace

BlasReport probe_blas() {
  BlasReport report;
  report.library = library_providing("sgemm_");
  report.matmul_gflops = measure_matmul_gflops();
  // The reference BLAS lives in .../blas/libblas.so.3; an optimized one names itself
  // (openblas, blis, mkl). Its throughput, a few GFLOP/s, gives it away as well.
  const bool named_reference = report.library.find("/blas/libblas") != std::string::npos;
  report.looks_like_reference = named_reference || report.matmul_gflops < 15.0;
  return report;
}

}  // namespace lrmoe
