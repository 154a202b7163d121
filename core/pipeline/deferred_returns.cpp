#include "core/pipeline/deferred_returns.hpp"

#include <algorithm>

namespace lrmoe {

void hide_deferred_returns(std::vector<LayerStepStatistics>& layers) {
  for (std::size_t l = 1; l < layers.size(); ++l) {
    const std::vector<LayerStepStatistics::PassReturn>& above = layers[l].pass_returns;
    const std::vector<LayerStepStatistics::PassReturn>& below = layers[l - 1].pass_returns;
    // Every layer plans every pass; a step cut short by an error has nothing to adjust.
    const std::size_t passes = std::min(above.size(), below.size());
    for (std::size_t p = 0; p < passes; ++p) {
      layers[l].modeled.hide_transfer(std::min(above[p].deferred_return, below[p].backward_cover));
    }
  }
}

}  // namespace lrmoe
