#include "core/pipeline/pair_layout.hpp"

#include <numeric>

namespace lrmoe {
namespace {

std::vector<int64_t> counts_of(const torch::Tensor& processes, int64_t count) {
  std::vector<int64_t> counts(static_cast<std::size_t>(count), 0);
  const int64_t* p = processes.data_ptr<int64_t>();
  for (int64_t i = 0; i < processes.numel(); ++i) ++counts[p[i]];
  return counts;
}

}  // namespace

ProcessSlice process_slice(const torch::Tensor& device_order, const torch::Tensor& instance,
                           const torch::Tensor& home, const std::vector<int64_t>& instance_offsets,
                           const InstanceTable& table, const ProcessView& process,
                           const torch::Device& device) {
  ProcessSlice slice;
  if (process.processes == 1) {
    // Everything is here: the move is the permutation into destination order.
    const int64_t pairs = instance.numel();
    slice.home_pairs = torch::arange(pairs, torch::kInt64);
    slice.send_rows = device_order;
    slice.send_counts = slice.recv_counts = {pairs};
    slice.instance_offsets = instance_offsets;
    return slice;
  }
  const torch::Tensor order = device_order.to(torch::kCPU);
  const torch::Tensor home_process = home.div(process.ranks_per_process, "floor");
  const torch::Tensor instance_process =
      torch::tensor(table.instance_rank, torch::kInt64).div(process.ranks_per_process, "floor");
  const torch::Tensor destination_process =
      instance_process.index_select(0, instance.index_select(0, order));

  // Sending: this process's home pairs in destination order (hence grouped by destination).
  const torch::Tensor is_home = home_process.eq(process.index);
  slice.home_pairs = is_home.nonzero().reshape({-1});
  const torch::Tensor home_row = is_home.to(torch::kInt64).cumsum(0) - 1;  // valid where is_home
  const torch::Tensor sent_mask = is_home.index_select(0, order);
  slice.send_rows = home_row.index_select(0, order.masked_select(sent_mask)).to(device);
  slice.send_counts = counts_of(destination_process.masked_select(sent_mask), process.processes);

  // Receiving: the destination rows here are one contiguous run, as instances go by rank and a
  // process hosts consecutive ranks (Note [Pair order]).
  const torch::Tensor here = destination_process.eq(process.index);
  const int64_t rows = here.sum().item<int64_t>();
  slice.first_row = rows > 0 ? here.to(torch::kInt64).argmax().item<int64_t>() : 0;
  const torch::Tensor source = home_process.index_select(0, order.narrow(0, slice.first_row, rows));
  slice.recv_counts = counts_of(source, process.processes);
  // Each source sends its rows in destination order: the buffer is ordered by (source, row).
  const torch::Tensor buffer_order = std::get<1>(torch::sort(source, /*stable=*/true, 0, false));
  slice.arrival =
      torch::empty_like(buffer_order).index_copy_(0, buffer_order, torch::arange(rows)).to(device);

  slice.instance_offsets.assign(instance_offsets.size(), 0);
  for (std::size_t i = 0; i + 1 < instance_offsets.size(); ++i) {
    const bool local = process.process_of(table.instance_rank[i]) == process.index;
    const int64_t count = local ? instance_offsets[i + 1] - instance_offsets[i] : 0;
    slice.instance_offsets[i + 1] = slice.instance_offsets[i] + count;
  }
  return slice;
}

PairLayout build_pair_layout(const torch::Tensor& instance, const torch::Tensor& home,
                             const InstanceTable& table, int64_t ranks, const ProcessView& process,
                             const torch::Device& device) {
  PairLayout layout;
  layout.ranks = ranks;
  layout.instance = instance;
  // Stable, so a slice keeps its pairs in pair order (expert, then token): deterministic, and the
  // same on every process (Note [Pair order] in docs/notes.md).
  layout.order =
      std::get<1>(torch::sort(instance, /*stable=*/true, /*dim=*/0, /*descending=*/false))
          .to(device);

  const auto r = static_cast<std::size_t>(ranks);
  layout.instance_offsets.assign(static_cast<std::size_t>(table.size()) + 1, 0);
  layout.load.assign(r, 0);
  layout.matrix.assign(r * r, 0);
  const int64_t* inst = instance.data_ptr<int64_t>();
  const int64_t* from = home.data_ptr<int64_t>();
  for (int64_t p = 0; p < instance.numel(); ++p) {
    ++layout.instance_offsets[inst[p] + 1];
    const int64_t destination = table.instance_rank[inst[p]];
    ++layout.matrix[from[p] * ranks + destination];
    ++layout.load[destination];
  }
  std::partial_sum(layout.instance_offsets.begin(), layout.instance_offsets.end(),
                   layout.instance_offsets.begin());
  layout.local =
      process_slice(layout.order, instance, home, layout.instance_offsets, table, process, device);
  return layout;
}

}  // namespace lrmoe
