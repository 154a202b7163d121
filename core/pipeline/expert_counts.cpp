#include "core/pipeline/expert_counts.hpp"

namespace lrmoe {

std::vector<int64_t> int64_values(const torch::Tensor& values) {
  auto cpu = values.to(torch::kCPU, torch::kInt64).contiguous();
  return {cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel()};
}

std::vector<int64_t> expert_counts(const torch::Tensor& experts, int64_t num_experts) {
  return int64_values(torch::bincount(experts, /*weights=*/{}, num_experts));
}

std::vector<int64_t> offsets_from_counts(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets(counts.size() + 1, 0);
  for (std::size_t e = 0; e < counts.size(); ++e) offsets[e + 1] = offsets[e] + counts[e];
  return offsets;
}

}  // namespace lrmoe
