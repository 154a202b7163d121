#include "core/pipeline/layer_statistics.hpp"

#include <algorithm>

namespace lrmoe {

const char* plan_information_name(PlanInformation information) {
  switch (information) {
    case PlanInformation::ThisPass:
      return "this pass";
    case PlanInformation::EarlierPasses:
      return "earlier passes";
    case PlanInformation::WarmUp:
      return "warm-up";
    case PlanInformation::NoCounts:
      return "no counts";
  }
  return "this pass";
}

LayerTraffic& LayerTraffic::operator+=(const LayerTraffic& o) {
  forward_dispatch += o.forward_dispatch;
  forward_combine += o.forward_combine;
  backward_dispatch += o.backward_dispatch;
  backward_return += o.backward_return;
  replica_sync += o.replica_sync;
  cross_node += o.cross_node;
  return *this;
}

PipelineOverhead& PipelineOverhead::operator+=(const PipelineOverhead& o) {
  placement += o.placement;
  metric += o.metric;
  selection += o.selection;
  routing += o.routing;
  compaction += o.compaction;
  return *this;
}

PlanCollectives& PlanCollectives::operator+=(const PlanCollectives& o) {
  seconds += o.seconds;
  bytes_received += o.bytes_received;
  bytes_held = std::max(bytes_held, o.bytes_held);
  return *this;
}

void LayerStepStatistics::read_times(bool* waited) {
  forward_seconds = spans.forward.read(waited);
  backward_seconds = spans.backward.read(waited);
  exchange.seconds = spans.exchange.read(waited);
  for (int phase = 0; phase < kPhases; ++phase) {
    rank_expert_seconds[phase].clear();
    for (const TimedSpans& rank : spans.rank_expert[phase])
      rank_expert_seconds[phase].push_back(rank.read(waited));
  }
}

}  // namespace lrmoe
