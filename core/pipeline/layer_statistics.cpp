#include "core/pipeline/layer_statistics.hpp"

#include <algorithm>

namespace lrmoe {

RankMemory& RankMemory::operator+=(const RankMemory& o) {
  owned += o.owned;
  replicas += o.replicas;
  gradients += o.gradients;
  optimizer += o.optimizer;
  forward_tokens += o.forward_tokens;
  backward_tokens += o.backward_tokens;
  dense += o.dense;
  return *this;
}

RankMemory RankMemory::max(const RankMemory& a, const RankMemory& b) {
  RankMemory m;
  m.owned = std::max(a.owned, b.owned);
  m.replicas = std::max(a.replicas, b.replicas);
  m.gradients = std::max(a.gradients, b.gradients);
  m.optimizer = std::max(a.optimizer, b.optimizer);
  m.forward_tokens = std::max(a.forward_tokens, b.forward_tokens);
  m.backward_tokens = std::max(a.backward_tokens, b.backward_tokens);
  m.dense = std::max(a.dense, b.dense);
  return m;
}

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
