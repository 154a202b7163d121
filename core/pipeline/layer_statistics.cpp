#include "core/pipeline/layer_statistics.hpp"

namespace lrmoe {

LayerTraffic& LayerTraffic::operator+=(const LayerTraffic& o) {
  forward_dispatch += o.forward_dispatch;
  forward_combine += o.forward_combine;
  backward_dispatch += o.backward_dispatch;
  backward_return += o.backward_return;
  replica_sync += o.replica_sync;
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

}  // namespace lrmoe
