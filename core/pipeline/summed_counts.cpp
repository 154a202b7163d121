#include "core/pipeline/summed_counts.hpp"

#include <algorithm>

namespace lrmoe {

std::vector<int64_t> summed_over_processes(Collectives& collectives, std::vector<int64_t> counts) {
  // as empty on every process: nothing to sum
  if (collectives.single() || counts.empty()) return counts;
  // Summed where they lie: a tensor over the vector's storage.
  torch::Tensor total =
      torch::from_blob(counts.data(), {static_cast<int64_t>(counts.size())}, torch::kInt64);
  collectives.sum(total);
  return counts;
}

std::vector<std::vector<int64_t>> summed_over_processes(Collectives& collectives,
                                                        std::vector<std::vector<int64_t>> counts) {
  if (collectives.single()) return counts;
  std::vector<int64_t> flat;
  for (const std::vector<int64_t>& one : counts) flat.insert(flat.end(), one.begin(), one.end());
  flat = summed_over_processes(collectives, std::move(flat));
  const int64_t* from = flat.data();
  for (std::vector<int64_t>& one : counts) {
    std::copy(from, from + one.size(), one.begin());
    from += one.size();
  }
  return counts;
}

}  // namespace lrmoe
