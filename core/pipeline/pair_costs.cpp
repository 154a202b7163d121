#include "core/pipeline/pair_costs.hpp"

namespace lrmoe {

ElementSizes element_sizes(Precision precision) {
  return {4, precision == Precision::Bf16 ? 2 : 4};
}

PairCosts pair_costs(const ModelConfig& model, bool recompute, ElementSizes element_bytes) {
  const int64_t hidden = model.hidden_size;
  const int64_t ffn = model.expert_ffn_size;
  const int64_t a = element_bytes.activation;
  PairCosts costs;
  costs.element_bytes = element_bytes;
  costs.hidden = hidden;
  costs.ffn = ffn;
  costs.row_bytes = hidden * a;
  costs.pre_activation_bytes = 2 * ffn * a;
  // gate and up [2 ffn, h], down [h, ffn]
  costs.expert_bytes = 3 * hidden * ffn * element_bytes.parameter;
  costs.memory.expert_bytes = costs.expert_bytes;
  costs.memory.forward_pair_bytes =
      (2 * hidden + ffn) * a + (recompute ? costs.pre_activation_bytes : 0);
  costs.memory.saved_pair_bytes = recompute ? 0 : costs.pre_activation_bytes;
  costs.memory.backward_pair_bytes = (3 * hidden + 4 * ffn) * a;
  return costs;
}

PairCosts pair_costs(const ModelConfig& model, const Experiment& experiment) {
  return pair_costs(model, experiment.policies.recompute,
                    element_sizes(experiment.train.precision));
}

}  // namespace lrmoe
