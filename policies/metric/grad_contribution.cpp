// Metric "grad_contribution": a pair's score is g * |d| * |h|, exactly the Frobenius norm of its
// rank-1 contribution to the expert's down-projection weight gradient (h the SwiGLU hidden
// activation). When the layer does not provide |h|, g * |d| * |x| (x the expert input) stands in:
// it bounds the up/gate projection contributions the same way.

#include <lrmoe/plugin.hpp>

namespace {

class GradContribution : public lrmoe::MetricPolicy {
 public:
  explicit GradContribution(const lrmoe::Parameters&) {}
  at::Tensor score(const lrmoe::PairBatch& pairs) override {
    const at::Tensor& activation_norm =
        pairs.hidden_norm.defined() ? pairs.hidden_norm : pairs.input_norm;
    return pairs.gates * pairs.upstream_norm * activation_norm;
  }
};

lrmoe::PluginDescriptor describe() {
  return lrmoe::describe_policy<GradContribution>(
      "grad_contribution", "1.0.0", "score = g * |d| * |h| (|x| when |h| is unavailable)");
}

}  // namespace

LRMOE_PLUGIN(describe)
