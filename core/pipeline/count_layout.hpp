#pragma once
// The scalable plan's layout of one pass (Note [Scalable planning] in docs/notes.md), built from
// the routed pairs per (home rank, instance), which every process agrees on, and this process's
// own pairs: no process sees another's pairs. Its counts (`instance_offsets`, `load`, `matrix`)
// and this process's slice are those build_pair_layout makes in the exact plan for the same
// routing; its tensors `instance` and `order` cover this process's pairs only.

#include <torch/torch.h>

#include <vector>

#include "core/pipeline/pair_layout.hpp"

namespace lrmoe {

// `routed`: [ranks * instances] pairs homed on rank h routed to instance i at
// [h * instances + i], the same on every process (a CountRoutingPolicy's answer, checked);
// `pairs`: m, this process's pairs of the pass, every one homed on one of its ranks and taken
// in pair order, so that they run by expert and then home rank (Note [Pair order]); `device`,
// the training device, where the layout's tensors go. Each (home rank, expert) group's pairs go
// to the expert's instances in table.instances_of order, as many to each as `routed` says.
// Throws PlanError when the counts of `routed` for this process's ranks do not add up to m. The
// layout keeps `routed` as its home_instance. `with_instances`: whether to lay out each pair's
// instance (`instance`), which only a pass split in chunks reads; else it stays undefined.
PairLayout count_pair_layout(std::vector<int64_t> routed, int64_t pairs,
                             const torch::Device& device, const InstanceTable& table, int64_t ranks,
                             const ProcessView& process, bool with_instances);

}  // namespace lrmoe
