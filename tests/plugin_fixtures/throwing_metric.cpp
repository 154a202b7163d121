// A metric named "throwing_metric" that loads and is created fine, then throws an int from
// score(): a run using it must fail with one line naming the plugin and be recorded failed.
#include <lrmoe/plugin.hpp>

namespace {

class Throwing : public lrmoe::MetricPolicy {
 public:
  explicit Throwing(const lrmoe::Parameters&) {}
  at::Tensor score(const lrmoe::PairBatch&) override { throw 42; }
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<Throwing>("throwing_metric", "0.1.0", "throws from score()");
}

}  // namespace

LRMOE_PLUGIN(describe)
