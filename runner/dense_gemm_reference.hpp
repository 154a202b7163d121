#pragma once
// The machine's dense GEMM throughput at an MoE layer's shapes: the limit the benches compare
// the grouped expert GEMMs and the whole layer with. One [rows, hidden] x [hidden, 3 * ffn]
// matmul (a gate, an up and a down projection's FLOPs for `rows` pairs), in the compute dtype on
// the device; on the CPU one BLAS call on every intra-op thread.

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
  // How it runs, for the benches' output: "one BLAS call on 2 threads" on the CPU.
  std::string description() const;

 private:
  torch::Device device_;
  torch::Tensor x_, weight_, out_;
  double flops_ = 0;
};

}  // namespace lrmoe
