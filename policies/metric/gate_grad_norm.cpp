// Metric "gate_grad_norm": a pair's score is g * |d|, the norm of the gradient the pair sends
// into its expert's output (gate g, upstream gradient d at the token). Unlike the gate alone it
// sees how much the loss cares about the token.

#include <lrmoe/plugin.hpp>

namespace {

class GateGradNorm : public lrmoe::MetricPolicy {
 public:
  explicit GateGradNorm(const lrmoe::Parameters&) {}
  at::Tensor score(const lrmoe::PairBatch& pairs) override {
    return pairs.gates * pairs.upstream_norm;
  }
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<GateGradNorm>("gate_grad_norm", "1.0.0", "score = g * |d|");
}

}  // namespace

LRMOE_PLUGIN(describe)
