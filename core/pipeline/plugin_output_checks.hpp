#pragma once
// What the pipeline checks of a plugin's answer before it uses it: a wrong shape, an index out of
// range or a pair sent to another expert's instance is a PlanError naming the plugin, not a
// crash or a silently wrong plan. (The placement's answer is checked by build_instance_table.)

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/pipeline/instance_table.hpp"
#include "lrmoe/selection.hpp"

namespace lrmoe {

// Each check of a device tensor brings its verdict to the host in one small copy, so it waits for
// the device once (Note [Host synchronisation] in docs/notes.md).

// The routing's answer for `experts` ([pairs] int64 on the device of table's tensors): one
// instance of each pair's own expert. Returns it as a [pairs] int64 tensor on that device.
torch::Tensor checked_routing(const torch::Tensor& instance, const torch::Tensor& experts,
                              const InstanceTable& table, const std::string& policy);

// A count routing's answer (lrmoe::CountRoutingPolicy) for `pairs` [ranks * experts] per (home
// rank, expert): [ranks * instances] counts >= 0, each (home rank, expert) group's over its own
// expert's instances adding up to the group, none on another expert's instance.
void check_count_routing(const std::vector<int64_t>& routed, const std::vector<int64_t>& pairs,
                         int64_t ranks, const InstanceTable& table, const std::string& policy);

// A ranked selection's answer (lrmoe::RankedSelectionPolicy) for an expert with `pairs` pairs:
// kept in [0, pairs], and at most `quota` when `values`; a weight finite and > 0.
void check_kept_count(int64_t kept, int64_t pairs, int64_t quota, int64_t expert, bool values,
                      const std::string& policy);
void check_kept_weight(float weight, int64_t expert, const std::string& policy);

// The checks of shape and index range are always made: an index out of range would fault. With
// `values` (policies.check_plugin_outputs, on by default) the values are checked too, so that a
// plugin cannot train silently on garbage: NaN or negative scores, NaN weights, quotas exceeded.
// They cost one more small reduction per pass (Note [Plugin boundary] in docs/notes.md).

// One input of a policy by what it is, for messages: {"gates", tensor}.
struct NamedInput {
  const char* name;
  torch::Tensor values;
};

// The metric's answer: one score per computed pair; with `values`, each finite and >= 0. A NaN or
// infinite score computed from NaN or infinite `inputs` (the pairs' gates and norms it was given)
// is training that diverged, and is reported as that, with how many of which input are not
// finite and the first of them, rather than as the plugin's fault.
void check_scores(const torch::Tensor& scores, int64_t pairs, bool values,
                  const std::string& policy, const std::vector<NamedInput>& inputs);

// The selection's answer for the computed pairs of `experts` ([n] int64 on the device): `kept` a
// strictly increasing [k] int64 of indices into them, and `weights` undefined or one per kept
// pair. With `values`: no expert keeps more pairs than its `quota` ([experts]), and every weight
// is finite and >= 0.
void check_selection(const Selection& selection, const torch::Tensor& experts,
                     const std::vector<int64_t>& quota, bool values, const std::string& policy);

}  // namespace lrmoe
