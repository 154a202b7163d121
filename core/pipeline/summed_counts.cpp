#include "core/pipeline/summed_counts.hpp"

#include <algorithm>

namespace lrmoe {

std::vector<std::vector<int64_t>> summed_over_processes(Collectives& collectives,
                                                        std::vector<std::vector<int64_t>> counts) {
  if (collectives.single()) return counts;
  // Summed where they lie: a tensor over the one vector's storage, or over their concatenation.
  std::vector<int64_t> flat;
  if (counts.size() != 1)
    for (const std::vector<int64_t>& one : counts) flat.insert(flat.end(), one.begin(), one.end());
  std::vector<int64_t>& summed = counts.size() == 1 ? counts.front() : flat;
  if (summed.empty()) return counts;  // as empty on every process: nothing to sum
  torch::Tensor total =
      torch::from_blob(summed.data(), {static_cast<int64_t>(summed.size())}, torch::kInt64);
  collectives.sum(total);
  if (counts.size() == 1) return counts;
  const int64_t* from = flat.data();
  for (std::vector<int64_t>& one : counts) {
    std::copy(from, from + one.size(), one.begin());
    from += one.size();
  }
  return counts;
}

}  // namespace lrmoe
