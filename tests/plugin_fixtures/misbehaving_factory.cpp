// A metric plugin whose descriptor or factory misbehaves; LRMOE_FIXTURE_CASE says how:
// 1: the factory returns no object, 2: the descriptor says metric but the factory makes a
// placement, 3: the constructor throws an int, 4: the descriptor function throws.
// Discovery (4) or creating the policy (1-3) must fail naming the library, not crash.
#include <lrmoe/plugin.hpp>

#include <stdexcept>

namespace {

class Quiet : public lrmoe::MetricPolicy {
 public:
  explicit Quiet(const lrmoe::Parameters&) {
#if LRMOE_FIXTURE_CASE == 3
    throw 42;
#endif
  }
  at::Tensor score(const lrmoe::PairBatch& pairs) override {
    return pairs.gates;
  }
};

class NotAMetric : public lrmoe::PlacementPolicy {
 public:
  lrmoe::PlacementPlan plan(const lrmoe::PlacementRequest&) override { return {}; }
};

lrmoe::PluginDescriptor describe() {
#if LRMOE_FIXTURE_CASE == 4
  throw std::runtime_error("cannot describe myself");
#endif
  lrmoe::PluginDescriptor descriptor =
      lrmoe::describe_policy<Quiet>("misbehaving", "0.1.0", "a factory that misbehaves");
#if LRMOE_FIXTURE_CASE == 1
  descriptor.create = [](const lrmoe::Parameters&) -> std::unique_ptr<lrmoe::Policy> {
    return nullptr;
  };
#elif LRMOE_FIXTURE_CASE == 2
  descriptor.create = [](const lrmoe::Parameters&) -> std::unique_ptr<lrmoe::Policy> {
    return std::make_unique<NotAMetric>();
  };
#endif
  return descriptor;
}

}  // namespace

LRMOE_PLUGIN(describe)
