// The replica gradients' return behind the layers below, in the cost model (Note [Overlapped
// expert fetch]): each layer's return hides behind the backward compute of the layer below it,
// pass by pass, and the lowest layer's stays whole.
#include <catch2/catch.hpp>

#include "core/pipeline/deferred_returns.hpp"

using namespace lrmoe;

namespace {

LayerStepStatistics layer_with(std::vector<LayerStepStatistics::PassReturn> passes) {
  LayerStepStatistics layer;
  layer.pass_returns = std::move(passes);
  layer.modeled.overlapped = 0.5;  // the chunks', kept
  return layer;
}

}  // namespace

TEST_CASE("a layer's deferred return hides behind the backward compute of the layer below it",
          "[cost]") {
  // Two passes. Layer 2's returns (3, 1) behind layer 1's backward (2, 4): 2 + 1 hidden. Layer
  // 1's (5, 0) behind layer 0's (10, 10): 5. Layer 0's return has nothing below it.
  std::vector<LayerStepStatistics> layers{
      layer_with({{7, 10}, {7, 10}}), layer_with({{5, 2}, {0, 4}}), layer_with({{3, 1}, {1, 1}})};
  hide_deferred_returns(layers);
  CHECK(layers[0].modeled.overlapped == 0.5);
  CHECK(layers[1].modeled.overlapped == 0.5 + 5);
  CHECK(layers[2].modeled.overlapped == 0.5 + 2 + 1);
  // Of the overlap, the transfers' part apart from the chunks' all-to-all.
  CHECK(layers[0].modeled.hidden_transfers == 0);
  CHECK(layers[1].modeled.hidden_transfers == 5);
  CHECK(layers[2].modeled.hidden_transfers == 2 + 1);
}

TEST_CASE("a return not deferred hides nothing, nor does a lone layer", "[cost]") {
  // The pipeline records a return waited for within its layer as 0.
  std::vector<LayerStepStatistics> layers{layer_with({{4, 10}}), layer_with({{0, 10}})};
  hide_deferred_returns(layers);
  CHECK(layers[1].modeled.overlapped == 0.5);
  std::vector<LayerStepStatistics> one{layer_with({{4, 10}})};
  hide_deferred_returns(one);
  CHECK(one[0].modeled.overlapped == 0.5);
}
