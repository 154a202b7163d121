#include "core/pipeline/pair_exchange.hpp"

namespace lrmoe {

torch::Tensor LocalExchange::dispatch(const torch::Tensor& home_rows, const PairLayout& layout) {
  return home_rows.index_select(0, layout.order);
}

torch::Tensor LocalExchange::combine(const torch::Tensor& destination_rows, const PairLayout& layout) {
  return torch::empty_like(destination_rows).index_copy_(0, layout.order, destination_rows);
}

}  // namespace lrmoe
