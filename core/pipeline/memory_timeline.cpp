#include "core/pipeline/memory_timeline.hpp"

#include <algorithm>
#include <cmath>

namespace lrmoe {
namespace {

int64_t whole(double bytes) {
  return static_cast<int64_t>(std::llround(bytes));
}

// One moment, category by category. `live` layers are those whose forward has run and whose
// backward has not finished; `current` is the layer running at the moment. A layer placed ahead
// holds its replicas from the previous layer's forward.
RankMemory at_moment(const MemoryCosts& c, const std::vector<LayerHolding>& layers,
                     const StaticMemory& fixed, const std::vector<bool>& placed_ahead,
                     TimelineMoment moment) {
  RankMemory m;
  m.optimizer = fixed.optimizer;
  m.dense = fixed.dense;
  const auto current = static_cast<std::size_t>(moment.layer);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const LayerHolding& h = layers[l];
    m.owned += h.owned * c.expert_bytes;
    m.gradients += h.owned * c.expert_bytes;
    const bool live = l <= current;  // not yet forwarded, or already backwarded, otherwise
    const bool arriving = moment.phase == Phase::Forward && l == current + 1 &&
                          l < placed_ahead.size() && placed_ahead[l];
    if (live || arriving) m.replicas += h.replicas * c.expert_bytes;
    if (!live) continue;
    m.forward_tokens += whole(h.forward_pairs * static_cast<double>(c.saved_pair_bytes));
  }
  const LayerHolding& now = layers[current];
  if (moment.phase == Phase::Forward) {
    m.forward_tokens += whole(forward_transient_bytes(c, now));
  } else {
    m.backward_tokens += whole(now.backward_pairs * static_cast<double>(c.backward_pair_bytes));
    m.gradients += now.replicas * c.expert_bytes;
  }
  return m;
}

}  // namespace

const char* phase_name(Phase phase) {
  return phase == Phase::Forward ? "forward" : "backward";
}

MemoryPeak pass_peak(const MemoryCosts& costs, const std::vector<LayerHolding>& layers,
                     const StaticMemory& fixed, const std::vector<bool>& placed_ahead) {
  MemoryPeak peak;
  bool first = true;
  auto visit = [&](TimelineMoment moment) {
    const RankMemory m = at_moment(costs, layers, fixed, placed_ahead, moment);
    if (first || m.total() > peak.at_peak.total()) {
      peak.at_peak = m;
      peak.peak = moment;
    }
    if (first || m.subtotal() > peak.subtotal) {
      peak.subtotal = m.subtotal();
      peak.subtotal_peak = moment;
    }
    first = false;
  };
  const auto count = static_cast<int64_t>(layers.size());
  for (int64_t l = 0; l < count; ++l) visit({Phase::Forward, l});
  for (int64_t l = count - 1; l >= 0; --l) visit({Phase::Backward, l});
  if (first) {  // no MoE layers: the static memory alone
    peak.at_peak.optimizer = fixed.optimizer;
    peak.at_peak.dense = fixed.dense;
  }
  return peak;
}

MemoryPeak max_peak(const MemoryPeak& a, const MemoryPeak& b) {
  MemoryPeak m = a;
  if (b.at_peak.total() > a.at_peak.total()) {
    m.at_peak = b.at_peak;
    m.peak = b.peak;
  }
  if (b.subtotal > a.subtotal) {
    m.subtotal = b.subtotal;
    m.subtotal_peak = b.subtotal_peak;
  }
  return m;
}

double layer_subtotal_bytes(const MemoryCosts& c, const LayerHolding& h) {
  const double backward_tokens = h.backward_pairs * static_cast<double>(c.backward_pair_bytes);
  return static_cast<double>(h.owned + h.replicas) * static_cast<double>(c.expert_bytes) +
         h.forward_pairs * static_cast<double>(c.saved_pair_bytes) +
         std::max(forward_transient_bytes(c, h), backward_tokens);
}

std::vector<MemoryPeak> step_memory_peaks(const MemoryCosts& costs,
                                          const std::vector<LayerStepStatistics>& layers,
                                          const StaticMemory& fixed) {
  std::vector<MemoryPeak> peaks;
  if (layers.empty()) return peaks;
  const std::size_t passes = layers.front().passes.size();
  const std::size_t ranks = passes == 0 ? 0 : layers.front().passes.front().size();
  peaks.resize(ranks);
  std::vector<bool> placed_ahead;
  for (const LayerStepStatistics& layer : layers) placed_ahead.push_back(layer.placed_ahead);
  for (std::size_t r = 0; r < ranks; ++r) {
    for (std::size_t pass = 0; pass < passes; ++pass) {
      std::vector<LayerHolding> holdings;
      for (const LayerStepStatistics& layer : layers) holdings.push_back(layer.passes[pass][r]);
      const MemoryPeak peak = pass_peak(costs, holdings, fixed, placed_ahead);
      peaks[r] = pass == 0 ? peak : max_peak(peaks[r], peak);
    }
  }
  return peaks;
}

}  // namespace lrmoe
