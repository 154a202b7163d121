#include "core/train/process_footprint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "core/config/byte_size.hpp"
#include "core/config/parameter_count.hpp"
#include "core/device/cuda_runtime.hpp"
#include "core/pipeline/expert_fetch_plan.hpp"
#include "core/pipeline/instance_table.hpp"
#include "core/pipeline/rank_budget.hpp"
#include "core/system/machine_memory.hpp"

namespace lrmoe {

ProcessFootprint process_footprint(const ModelConfig& model, const TrainConfig& train,
                                   const ClusterConfig& cluster, int64_t processes) {
  int64_t parameters = count_parameters(model).total;
  if (cluster.expert_state == ExpertState::Sharded) {
    // The process holding the most experts: the others hold no more.
    const ProcessView view{0, processes, cluster.ranks / processes};
    int64_t most = 0;
    for (int64_t p = 0; p < processes; ++p)
      most = std::max(most, home_shard(model.num_experts, cluster.ranks, view, p).count);
    parameters -= (model.num_experts - most) * routed_expert_parameters(model);
  }
  ProcessFootprint footprint;
  footprint.model_state_bytes = 16.0 * static_cast<double>(parameters);  // 4 fp32 copies
  const int64_t rows = train.batch_size / processes;
  footprint.activation_bytes = static_cast<double>(dense_activation_bytes(
      model, rows * train.seq_len, train.seq_len, element_sizes(train.precision).activation));
  return footprint;
}

void check_footprint_fits(const ProcessFootprint& footprint, const torch::Device& device,
                          int64_t processes_on_host) {
  double need = footprint.total();
  double have = 0;
  std::string where;
  std::string processes;
  if (device.is_cuda()) {
    const auto gpu = gpu_properties(device.index());
    if (!gpu) return;  // resolve_device has already refused a GPU that is not there
    have = static_cast<double>(gpu->memory_bytes);
    where = fmt::format("GPU {} ({})", device.index(), gpu->name);
  } else {
    const MemoryLimit limit = host_memory_limit();
    have = static_cast<double>(limit.bytes);
    need *= static_cast<double>(processes_on_host);
    where = "this host's " + limit.what;
    if (processes_on_host > 1)
      processes = fmt::format(", {} for the {} processes on this host", readable_byte_size(need),
                              processes_on_host);
  }
  if (need <= have) return;
  throw PlanError(fmt::format(
      "training would hold at least {} per process ({} of parameters, gradients and Adam state "
      "for {:.3g} parameters, {} of activations outside the experts, {} of the process's own "
      "runtime){}, more than {} ({}); lower train.batch_size, train.seq_len or the model's "
      "dimensions, start fewer processes, or plan a full-size model without allocating it with "
      "`lrmoe replay`",
      readable_byte_size(footprint.total()), readable_byte_size(footprint.model_state_bytes),
      footprint.model_state_bytes / 16, readable_byte_size(footprint.activation_bytes),
      readable_byte_size(footprint.runtime_bytes), processes, where, readable_byte_size(have)));
}

}  // namespace lrmoe
