// A metric whose parameter declaration contradicts itself; LRMOE_FIXTURE_CASE says how:
// 1: a default outside its range, 2: a minimum above its maximum, 3: a NaN default, 4: a name
// that is not a bare TOML key.
// Loading it must fail naming the library and the parameter.
#include <lrmoe/plugin.hpp>

#include <limits>

namespace {

class DeclaredBadly : public lrmoe::MetricPolicy {
 public:
  explicit DeclaredBadly(const lrmoe::Parameters&) {}
  at::Tensor score(const lrmoe::PairBatch& pairs) override { return pairs.gates; }
};

lrmoe::ParameterSpec power() {
#if LRMOE_FIXTURE_CASE == 1
  return lrmoe::real_parameter("power", 5.0, "exponent", 0, 2);
#elif LRMOE_FIXTURE_CASE == 2
  return lrmoe::real_parameter("power", 1.0, "exponent", 2, 0);
#elif LRMOE_FIXTURE_CASE == 4
  return lrmoe::real_parameter("two words", 1.0, "exponent");
#else
  return lrmoe::real_parameter("power", std::numeric_limits<double>::quiet_NaN(), "exponent");
#endif
}

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<DeclaredBadly>(
      "declared_badly", "0.1.0", "a parameter declaration that contradicts itself", {power()});
}

}  // namespace

LRMOE_PLUGIN(describe)
