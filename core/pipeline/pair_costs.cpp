#include "core/pipeline/pair_costs.hpp"

namespace lrmoe {

PairCosts pair_costs(const ModelConfig& model, bool recompute, int64_t element_bytes) {
  const int64_t hidden = model.hidden_size;
  const int64_t ffn = model.expert_ffn_size;
  PairCosts costs;
  costs.element_bytes = element_bytes;
  costs.hidden = hidden;
  costs.ffn = ffn;
  costs.row_bytes = hidden * element_bytes;
  costs.pre_activation_bytes = 2 * ffn * element_bytes;
  costs.expert_bytes = 3 * hidden * ffn * element_bytes;  // gate and up [2 ffn, h], down [h, ffn]
  costs.memory.expert_bytes = costs.expert_bytes;
  costs.memory.forward_pair_bytes =
      (2 * hidden + ffn) * element_bytes + (recompute ? costs.pre_activation_bytes : 0);
  costs.memory.saved_pair_bytes = recompute ? 0 : costs.pre_activation_bytes;
  costs.memory.backward_pair_bytes = (3 * hidden + 4 * ffn) * element_bytes;
  return costs;
}

}  // namespace lrmoe
