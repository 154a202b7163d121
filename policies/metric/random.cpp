// Metric "random": every pair scores uniform [0, 1), independently of its data. With quota_topk
// it is the random-retention control every comparison needs: the same number of pairs kept,
// chosen without looking at their contribution. Seeded with the pairs' seed, so a run repeats.

#include <ATen/CPUGeneratorImpl.h>
#include <lrmoe/plugin.hpp>

namespace {

class Random : public lrmoe::MetricPolicy {
 public:
  explicit Random(const lrmoe::Parameters&) {}
  at::Tensor score(const lrmoe::PairBatch& pairs) override {
    // Drawn on the CPU so that the scores do not depend on the device.
    const at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(pairs.seed);
    return at::rand({pairs.experts.numel()}, generator).to(pairs.experts.device());
  }
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<Random>("random", "1.0.0",
                                        "score = uniform [0, 1), seeded per step and layer");
}

}  // namespace

LRMOE_PLUGIN(describe)
