#pragma once
// The machine's dense GEMM throughput at an MoE layer's shapes: the limit the benches compare
// the grouped expert GEMMs and the whole layer with. One [rows, hidden] x [hidden, 3 * ffn]
// matmul (a gate, an up and a down projection's FLOPs for `rows` pairs), in the compute dtype on
// the device. On the CPU its rows are split over LibTorch's intra-op threads, one single-threaded
// BLAS call each, as the expert GEMMs run: switching OpenBLAS to many threads for the reference
// and back made it allocate fresh thread buffers at every switch (about 180 MB a time, never
// returned), which slowed the layer timed after it and grew the process without bound.

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace lrmoe {

class DenseGemmReference {
 public:
  DenseGemmReference(int64_t rows, int64_t hidden, int64_t ffn, const torch::Device& device,
                     torch::ScalarType dtype);

  // One matmul, waited for.
  void run();
  double flops() const { return flops_; }
  // How it runs, for the benches' output: " (rows split over 2 threads)" on the CPU.
  std::string description() const;

 private:
  torch::Device device_;
  torch::Tensor x_, weight_, out_;
  double flops_ = 0;
};

}  // namespace lrmoe
