// A rank's memory over a step as a timeline (Note [Memory model]): the peak is taken over the
// moments where buffers are live together, for the total and the subtotal separately, and the
// per-layer plan check is an upper bound of it.
#include <catch2/catch.hpp>

#include "core/pipeline/memory_timeline.hpp"

using namespace lrmoe;

namespace {

// Expert parameters 100 bytes; per pair 2 bytes in forward, 1 saved until backward, 5 in backward.
constexpr MemoryCosts kCosts{100, 2, 1, 5};
const StaticMemory kStatic{1000, 500};  // optimizer, dense
// Layer 0: 2 owned, 1 replica, 10 pairs forward, 4 kept; layer 1: 2 owned, 20 forward, 10 kept.
const std::vector<LayerHolding> kLayers{{2, 1, 10, 4}, {2, 0, 20, 10}};

}  // namespace

TEST_CASE("a rank's memory peaks where its buffers are live together, total and subtotal apart",
          "[memory]") {
  // Owned parameters 400 and their gradients 400 all step; the replica (100) from layer 0's
  // forward to its backward; saved activations 10 (layer 0) and 20 (layer 1).
  //   forward 0:  subtotal 400 + 100 + (10 + 20)           = 530, total 530 + 400 + 1500       =
  //   2430 forward 1:  subtotal 400 + 100 + (10 + 20 + 40)      = 570, total 2470 backward 1:
  //   subtotal 400 + 100 + (10 + 20) + 50      = 580, total 580 + 400 + 1500       = 2480 backward
  //   0: subtotal 400 + 100 + 10 + 20             = 530, total 530 + (400 + 100) + 1500 = 2530
  const MemoryPeak peak = pass_peak(kCosts, kLayers, kStatic);
  CHECK(peak.at_peak.total() == 2530);
  CHECK(peak.peak.phase == Phase::Backward);
  CHECK(peak.peak.layer == 0);
  CHECK(peak.at_peak.owned == 400);
  CHECK(peak.at_peak.replicas == 100);
  CHECK(peak.at_peak.gradients == 500);  // the replica's gradient buffer in layer 0's backward
  CHECK(peak.at_peak.optimizer == 1000);
  CHECK(peak.at_peak.forward_tokens == 10);
  CHECK(peak.at_peak.backward_tokens == 20);
  CHECK(peak.at_peak.dense == 500);
  CHECK(peak.subtotal == 580);
  CHECK(peak.subtotal_peak.phase == Phase::Backward);
  CHECK(peak.subtotal_peak.layer == 1);
  CHECK(std::string(phase_name(peak.peak.phase)) == "backward");
}

TEST_CASE("the per-layer plan check bounds the timeline's peak from above", "[memory]") {
  // Layer 0: 400 + (100 + 10) + max(20, 20 + 100) = 630; layer 1: 400 + 20 + max(40, 50) = 470.
  CHECK(layer_peak_bytes(kCosts, kLayers[0]) == 630);
  CHECK(layer_peak_bytes(kCosts, kLayers[1]) == 470);
  const MemoryPeak peak = pass_peak(kCosts, kLayers, kStatic);
  CHECK(peak.at_peak.total() <= 630 + 470 + kStatic.optimizer + kStatic.dense);
}

TEST_CASE("a step's peak is the larger of its micro-batches' peaks, each measure on its own",
          "[memory]") {
  const MemoryPeak first = pass_peak(kCosts, kLayers, kStatic);
  // A micro-batch with more backward pairs in layer 1 only: its subtotal peaks higher (backward 1:
  // 580 + 5 * 30 = 730), its total (backward 1: 2630) too.
  const MemoryPeak second = pass_peak(kCosts, {{2, 1, 10, 4}, {2, 0, 20, 40}}, kStatic);
  const MemoryPeak step = max_peak(first, second);
  CHECK(step.subtotal == 730);
  CHECK(step.at_peak.total() == 2630);
  CHECK(max_peak(second, first).subtotal == 730);
}

TEST_CASE("fits functions give the pairs one more phase can take", "[memory]") {
  // Layer 1 with no forward pairs: 400 + max(0, 50) = 450. Each forward pair adds 1 saved and 2
  // in forward: (600 - 400 - 0) / 3 = 66 in the forward moment, (600 - 400 - 50) / 1 = 150 in
  // the backward one.
  CHECK(forward_pairs_that_fit(kCosts, {2, 0, 0, 10}, 600) == 66);
  // Kept pairs beside 20 forward pairs: (600 - 400 - 20) / 5 = 36.
  CHECK(backward_pairs_that_fit(kCosts, {2, 0, 20, 0}, 600) == 36);
  CHECK(backward_pairs_that_fit(kCosts, {2, 0, 20, 0}, 300) == 0);
}

TEST_CASE("a layer's own subtotal counts its instances, saved activations and busier phase only",
          "[memory]") {
  // Layer 0: (2 + 1) x 100 parameters + 10 saved + max(10 x 2 forward, 4 x 5 backward) = 330.
  CHECK(layer_subtotal_bytes(kCosts, kLayers[0]) == 330);
  // Layer 1: 2 x 100 + 20 saved + max(40 forward, 50 backward) = 270.
  CHECK(layer_subtotal_bytes(kCosts, kLayers[1]) == 270);
}

TEST_CASE(
    "a layer placed ahead holds its replicas from the previous layer's forward, within the "
    "per-layer bound",
    "[memory]") {
  // Layer 0: 100 pairs forward (saved 100, forward buffers 200), no replica; layer 1: 3 replicas
  // (300), 1 pair. Apart, the subtotal peaks in layer 1's forward: 400 + 300 + 101 + 2 = 803.
  // Placed ahead, layer 1's replicas arrive during layer 0's forward: 400 + 300 + 100 + 200 = 1000.
  const std::vector<LayerHolding> layers{{2, 0, 100, 0}, {2, 3, 1, 0}};
  const MemoryPeak apart = pass_peak(kCosts, layers, kStatic);
  CHECK(apart.subtotal == 803);
  CHECK(apart.subtotal_peak.layer == 1);
  const MemoryPeak ahead = pass_peak(kCosts, layers, kStatic, {false, true});
  CHECK(ahead.subtotal == 1000);
  CHECK(ahead.subtotal_peak.phase == Phase::Forward);
  CHECK(ahead.subtotal_peak.layer == 0);
  CHECK(ahead.at_peak.replicas == 300);
  // The replicas were reserved in layer 1's own budget all along.
  CHECK(ahead.at_peak.total() <= layer_peak_bytes(kCosts, layers[0]) +
                                     layer_peak_bytes(kCosts, layers[1]) + kStatic.optimizer +
                                     kStatic.dense);
}
