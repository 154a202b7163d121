#include "core/pipeline/cost_model.hpp"

#include <algorithm>

namespace lrmoe {

double CostModel::exchange_seconds(double sent_bytes, double received_bytes, int64_t peers) const {
  return static_cast<double>(peers) * latency + std::max(sent_bytes, received_bytes) / bandwidth;
}

}  // namespace lrmoe
