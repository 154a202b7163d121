#include "core/model/weight_bank.hpp"

namespace lrmoe {

int64_t matrix_of(const WeightIndex& weight_index, int64_t group) {
  return weight_index.empty() ? group : weight_index[static_cast<std::size_t>(group)];
}

WeightBank::WeightBank(torch::Tensor matrices) : first_(std::move(matrices)) {}

WeightBank::WeightBank(torch::Tensor first, torch::Tensor second)
    : first_(std::move(first)), second_(std::move(second)) {
  TORCH_CHECK(
      !has_second() || (second_.size(1) == first_.size(1) && second_.size(2) == first_.size(2) &&
                        second_.scalar_type() == first_.scalar_type()),
      "a weight bank's parts differ in matrix shape or dtype");
}

torch::Tensor WeightBank::second() const {
  return has_second() ? second_
                      : torch::empty({0, first_.size(1), first_.size(2)}, first_.options());
}

torch::Tensor WeightBank::matrix(int64_t m) const {
  const int64_t held = first_.size(0);
  return m < held ? first_[m] : second_[m - held];
}

torch::Tensor WeightBank::per_group(const WeightIndex& weight_index) const {
  if (!has_second()) {
    if (weight_index.empty()) return first_;
    return first_.index_select(0, torch::tensor(weight_index, torch::kInt64).to(first_.device()));
  }
  const int64_t groups = weight_index.empty() ? count() : static_cast<int64_t>(weight_index.size());
  std::vector<torch::Tensor> matrices;
  for (int64_t g = 0; g < groups; ++g) matrices.push_back(matrix(matrix_of(weight_index, g)));
  return torch::stack(matrices);
}

WeightBank WeightBank::empty_like() const {
  return has_second() ? WeightBank(torch::empty_like(first_), torch::empty_like(second_))
                      : WeightBank(torch::empty_like(first_));
}

}  // namespace lrmoe
