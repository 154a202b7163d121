// Metric "gate": a pair's score is its router gate g. The cheapest proxy for the pair's
// contribution to its expert's update, available before any backward signal: the expert's
// output gradient for the pair is g * d.

#include <lrmoe/plugin.hpp>

namespace {

class Gate : public lrmoe::MetricPolicy {
 public:
  explicit Gate(const lrmoe::Parameters&) {}
  // A copy: the scores belong to the caller, who may change them in place.
  at::Tensor score(const lrmoe::PairBatch& pairs) override { return pairs.gates.clone(); }
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<Gate>("gate", "1.0.0", "score = router gate g");
}

}  // namespace

LRMOE_PLUGIN(describe)
