#pragma once
// What the pipeline checks of a plugin's answer before it uses it: a wrong shape, an index out of
// range or a pair sent to another expert's instance is a PlanError naming the plugin, not a
// crash or a silently wrong plan. (The placement's answer is checked by build_instance_table.)

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "core/pipeline/instance_table.hpp"
#include "lrmoe/selection.hpp"

namespace lrmoe {

// Each check of a device tensor brings its verdict to the host in one small copy, so it waits for
// the device once (Note [Host synchronisation] in docs/notes.md).

// The routing's answer for `experts` ([pairs] int64 on the device of table's tensors): one
// instance of each pair's own expert. Returns it as a [pairs] int64 tensor on that device.
torch::Tensor checked_routing(const torch::Tensor& instance, const torch::Tensor& experts,
                              const InstanceTable& table, const std::string& policy);

// The metric's answer: one score per computed pair.
void check_scores(const torch::Tensor& scores, int64_t pairs, const std::string& policy);

// The selection's answer: `kept` a strictly increasing [k] int64 of indices into the `pairs`
// computed pairs, and `weights` undefined or one per kept pair.
void check_selection(const Selection& selection, int64_t pairs, const std::string& policy);

}  // namespace lrmoe
