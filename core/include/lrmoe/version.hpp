#pragma once
// Versions a plugin is checked against when it is loaded.
//
// kPluginApiVersion changes whenever an interface in core/include/lrmoe/ changes in a way that
// breaks binary compatibility; the loader refuses a plugin built against another value. The
// interfaces pass at::Tensor, so a plugin must also be built against the same LibTorch version
// as the runner: the loader compares the version each side was compiled with. Note [Plugin ABI]
// in docs/notes.md says what raises the version.

#include <torch/version.h>

namespace lrmoe {

// 2: PlacementRequest carries the liveness memory model (lrmoe/memory_model.hpp).
// 3: PluginDescriptor says where the policy reads its tensors (TensorPlace); routing and
//    backward-phase policies get them on the run's device unless it says Host.
// 4: Policy::save_state and restore_state, for exact resume from checkpoints.
// 5: PairBatch::pair_ids, so that per-pair draws agree between plans and processes.
// 6: PlacementPlan::co_located_share_copy and PlacementPlan::information.
// 7: PlacementPolicy::plans_from, so that placements planned without this pass's counts are
//    planned before the router and their replicas fetched behind the previous layer.
// 8: PlacementPlan::forward_drop, the rule by which pairs past the forward capacity drop.
// 9: PlacementPlan::quota_pool, the experts whose quotas are spread by score mass in backward.
inline constexpr int kPluginApiVersion = 9;

// Plain data, so that the loader can read it from any plugin before trusting its C++ types.
struct PluginAbi {
  int api_version;
  int torch_major;
  int torch_minor;
  int torch_patch;
};

// The ABI of the code including this header.
inline constexpr PluginAbi kCompiledAbi{kPluginApiVersion, TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR,
                                        TORCH_VERSION_PATCH};

}  // namespace lrmoe
