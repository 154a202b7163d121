#include "core/pipeline/summed_counts.hpp"

#include <algorithm>

namespace lrmoe {

std::vector<std::vector<int64_t>> summed_over_processes(Collectives& collectives,
                                                        std::vector<std::vector<int64_t>> counts) {
  if (collectives.single()) return counts;
  std::vector<int64_t> flat;
  for (const std::vector<int64_t>& one : counts) flat.insert(flat.end(), one.begin(), one.end());
  torch::Tensor total = torch::tensor(flat, torch::kInt64);
  collectives.sum(total);
  const int64_t* summed = total.data_ptr<int64_t>();
  for (std::vector<int64_t>& one : counts) {
    std::copy(summed, summed + one.size(), one.begin());
    summed += one.size();
  }
  return counts;
}

}  // namespace lrmoe
