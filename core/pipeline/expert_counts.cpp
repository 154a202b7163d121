#include "core/pipeline/expert_counts.hpp"

namespace lrmoe {

std::vector<int64_t> int64_values(const torch::Tensor& values) {
  auto cpu = values.to(torch::kCPU, torch::kInt64).contiguous();
  return {cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel()};
}

std::vector<std::vector<int64_t>> host_counts(const std::vector<CountRequest>& requests) {
  std::vector<torch::Tensor> counts;
  for (const CountRequest& request : requests) {
    // Not bincount: on CUDA it reads the largest key on the host to size its output.
    const torch::Tensor keys = request.keys.to(torch::kInt64);
    counts.push_back(
        torch::zeros({request.bins}, keys.options()).index_add_(0, keys, torch::ones_like(keys)));
  }
  const std::vector<int64_t> all = int64_values(torch::cat(counts));
  std::vector<std::vector<int64_t>> split;
  auto next = all.begin();
  for (const CountRequest& request : requests) {
    split.emplace_back(next, next + request.bins);
    next += request.bins;
  }
  return split;
}

std::vector<int64_t> expert_counts(const torch::Tensor& experts, int64_t num_experts) {
  return host_counts({{experts, num_experts}}).front();
}

std::vector<int64_t> offsets_from_counts(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets(counts.size() + 1, 0);
  for (std::size_t e = 0; e < counts.size(); ++e) offsets[e + 1] = offsets[e] + counts[e];
  return offsets;
}

}  // namespace lrmoe
