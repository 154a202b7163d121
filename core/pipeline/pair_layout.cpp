#include "core/pipeline/pair_layout.hpp"

#include <numeric>

namespace lrmoe {

int64_t PairLayout::crossing() const { return std::accumulate(sent.begin(), sent.end(), int64_t{0}); }

PairLayout build_pair_layout(const torch::Tensor& instance, const torch::Tensor& home, const InstanceTable& table,
                             int64_t ranks, const torch::Device& device) {
  PairLayout layout;
  layout.ranks = ranks;
  layout.instance = instance;
  // Stable, so a slice keeps its pairs in pair order (expert, then token): deterministic.
  layout.order = std::get<1>(torch::sort(instance, /*stable=*/true, /*dim=*/0, /*descending=*/false)).to(device);

  const auto r = static_cast<std::size_t>(ranks);
  layout.instance_offsets.assign(static_cast<std::size_t>(table.size()) + 1, 0);
  layout.load.assign(r, 0);
  layout.sent.assign(r, 0);
  layout.received.assign(r, 0);
  layout.peers_sent.assign(r, 0);
  layout.peers_received.assign(r, 0);
  std::vector<int64_t> matrix(r * r, 0);  // [source][destination]
  const int64_t* inst = instance.data_ptr<int64_t>();
  const int64_t* from = home.data_ptr<int64_t>();
  for (int64_t p = 0; p < instance.numel(); ++p) {
    ++layout.instance_offsets[inst[p] + 1];
    ++matrix[from[p] * ranks + table.instance_rank[inst[p]]];
  }
  std::partial_sum(layout.instance_offsets.begin(), layout.instance_offsets.end(), layout.instance_offsets.begin());
  for (std::size_t s = 0; s < r; ++s) {
    for (std::size_t d = 0; d < r; ++d) {
      const int64_t n = matrix[s * r + d];
      layout.load[d] += n;
      if (s == d || n == 0) continue;
      layout.sent[s] += n;
      layout.received[d] += n;
      ++layout.peers_sent[s];
      ++layout.peers_received[d];
    }
  }
  return layout;
}

}  // namespace lrmoe
