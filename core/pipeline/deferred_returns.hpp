#pragma once
// The replica gradients' return behind the layers below, in the cost model (Note [Overlapped
// expert fetch], Note [Cost model]): a step-level adjustment, because a layer's return is hidden
// by the backward of the layer below it, which is planned after it.

#include <vector>

#include "core/pipeline/layer_statistics.hpp"

namespace lrmoe {

// `layers`: one step's statistics of every MoE layer, in layer order, each with one
// LayerStepStatistics::PassReturn per pass. For every pass and every layer l > 0, adds
// min(layer l's deferred return, layer l - 1's backward cover) to layer l's
// modeled.overlapped and modeled.hidden_transfers. The lowest MoE layer's return, behind nothing
// the model counts, stays whole.
void hide_deferred_returns(std::vector<LayerStepStatistics>& layers);

}  // namespace lrmoe
