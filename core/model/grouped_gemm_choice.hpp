#pragma once
// Which grouped GEMM kernel a run uses, decided once at start (Note [Grouped GEMM kernels] in
// docs/notes.md) from train.grouped_gemm, the LibTorch, the device, the compute dtype and the
// model's dimensions.

#include <torch/torch.h>

#include <string>

#include "core/config/model_config.hpp"
#include "core/config/train_config.hpp"
#include "core/model/grouped_gemm.hpp"

namespace lrmoe {

struct GroupedGemmSelection {
  GroupedGemmKernel kernel = GroupedGemmKernel::SliceLoop;
  std::string reason;  // why this kernel, for the run's log
};

// auto: grouped-mm on a CUDA device of compute capability 8.0 or more when the LibTorch has it
// and the dimensions suit it, else slice-loop (on the CPU the loop over threads is the faster;
// `lrmoe bench` measures both side by side). Asking for grouped-mm where it cannot run throws
// std::invalid_argument naming train.grouped_gemm.
GroupedGemmSelection choose_grouped_gemm_kernel(GroupedGemmChoice choice,
                                                const torch::Device& device,
                                                torch::ScalarType dtype, const ModelConfig& model);

}  // namespace lrmoe
