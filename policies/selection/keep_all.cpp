// Selection "keep_all": every pair keeps its backward work, whatever its quota or score. The
// exact-gradient reference, and the behaviour of the fixed-ownership and SYMI baselines.
// A ranked selection that keeps every pair, so the scalable plan needs no threshold for it.

#include <lrmoe/plugin.hpp>

namespace {

class KeepAll : public lrmoe::RankedSelectionPolicy {
 public:
  explicit KeepAll(const lrmoe::Parameters&) {}
  lrmoe::Selection select(const lrmoe::PairBatch& pairs, const at::Tensor&) override {
    return {at::arange(pairs.experts.numel(), pairs.experts.options().dtype(at::kLong)),
            at::Tensor()};
  }
  int64_t kept_count(int64_t pairs, int64_t) const override { return pairs; }
  float kept_weight(int64_t, int64_t) const override { return 1.0F; }
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<KeepAll>("keep_all", "1.1.0", "keep every pair (exact gradients)");
}

}  // namespace

LRMOE_PLUGIN(describe)
