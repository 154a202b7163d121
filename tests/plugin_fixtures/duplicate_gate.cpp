// A second metric named "gate": loading it beside the built-in one must fail.
#include <lrmoe/plugin.hpp>

namespace {

class AnotherGate : public lrmoe::MetricPolicy {
 public:
  explicit AnotherGate(const lrmoe::Parameters&) {}
  at::Tensor score(const lrmoe::PairBatch& pairs) override { return pairs.gates; }
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<AnotherGate>("gate", "0.1.0", "a second plugin named gate");
}

}  // namespace

LRMOE_PLUGIN(describe)
