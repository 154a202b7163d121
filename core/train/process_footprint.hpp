#pragma once
// What one training process will allocate at least, checked against the machine before a run
// is recorded: sizes that fit the 1 EiB sanity cap of rank_budget.hpp but not this machine
// (train.seq_len = 1e5, a full-size preset) are refused with the numbers instead of failing in
// LibTorch's allocator after the run row exists.

#include <cstdint>

#include <torch/torch.h>

#include "core/config/cluster_config.hpp"
#include "core/config/model_config.hpp"
#include "core/config/train_config.hpp"

namespace lrmoe {

struct ProcessFootprint {
  // The parameters the process holds (every one, or with sharded expert state the dense ones and
  // the largest process's home experts), fp32, with their gradients and Adam's two moments: 16
  // bytes per parameter once the first step has run.
  double model_state_bytes = 0;
  // The activations autograd saves outside the experts for the process's rows of one micro-batch
  // (dense_activation_bytes). The experts' token buffers come on top.
  double activation_bytes = 0;
  // The process itself before any model: LibTorch's runtime and the runner (the largest resident
  // set of `lrmoe validate` on LibTorch 1.13 here: 165 MiB). It is what bounds how many
  // processes a launch may start, whatever the model.
  double runtime_bytes = 160.0 * (1 << 20);
  double total() const { return model_state_bytes + activation_bytes + runtime_bytes; }
};

// `processes`: the launch's processes, which share every micro-batch's rows equally and, with
// cluster.expert_state = "sharded", the experts.
ProcessFootprint process_footprint(const ModelConfig& model, const TrainConfig& train,
                                   const ClusterConfig& cluster, int64_t processes);

// Throws PlanError, with the numbers and what to lower, when the footprint does not fit: on a
// GPU its memory; on the CPU the host's memory limit shared by `processes_on_host` processes.
void check_footprint_fits(const ProcessFootprint& footprint, const torch::Device& device,
                          int64_t processes_on_host);

}  // namespace lrmoe
