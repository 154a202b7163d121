#pragma once
// Which BLAS LibTorch's matmuls end up in, and how fast it is.
//
// Debian's LibTorch calls the system BLAS through libblas.so.3. Without an optimized
// implementation (libopenblas0-pthread) that is the reference BLAS, about 30x slower; training
// then looks broken rather than slow, so the runner logs this at start-up and warns.

#include <string>

namespace lrmoe {

struct BlasReport {
  std::string library;       // resolved path of the shared library that provides sgemm_
  double matmul_gflops = 0;  // measured fp32 matmul throughput
  bool looks_like_reference = false;
};

// Takes about a quarter of a second.
BlasReport probe_blas();

}  // namespace lrmoe
