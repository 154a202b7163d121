// Selection "keep_all": every pair keeps its backward work, whatever its quota or score. The
// exact-gradient reference, and the behaviour of the fixed-ownership and SYMI baselines.

#include <lrmoe/plugin.hpp>

namespace {

class KeepAll : public lrmoe::SelectionPolicy {
 public:
  explicit KeepAll(const lrmoe::Parameters&) {}
  lrmoe::Selection select(const lrmoe::PairBatch& pairs, const at::Tensor&) override {
    return {at::arange(pairs.experts.numel(), pairs.experts.options().dtype(at::kLong)),
            at::Tensor()};
  }
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<KeepAll>("keep_all", "1.0.0", "keep every pair (exact gradients)");
}

}  // namespace

LRMOE_PLUGIN(describe)
