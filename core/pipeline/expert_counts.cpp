#include "core/pipeline/expert_counts.hpp"

#include <algorithm>

namespace lrmoe {

std::vector<int64_t> int64_values(const torch::Tensor& values) {
  auto cpu = values.to(torch::kCPU, torch::kInt64).contiguous();
  return {cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel()};
}

std::vector<std::vector<int64_t>> host_counts(const std::vector<CountRequest>& requests) {
  const bool on_host = std::all_of(requests.begin(), requests.end(), [](const CountRequest& r) {
    return r.keys.device().is_cpu() && (!r.columns.defined() || r.columns.device().is_cpu());
  });
  if (on_host) {
    // Counted in place: a few tensor operations a request cost more than the counting.
    std::vector<std::vector<int64_t>> split;
    for (const CountRequest& request : requests) {
      const torch::Tensor keys = request.keys.to(torch::kInt64).contiguous();
      const int64_t* key = keys.data_ptr<int64_t>();
      std::vector<int64_t>& count =
          split.emplace_back(static_cast<std::size_t>(request.cells()), 0);
      // Without columns every pair is in column 0 of a table of one column.
      torch::Tensor columns;
      const int64_t* column = nullptr;
      if (request.columns.defined()) {
        columns = request.columns.to(torch::kInt64).contiguous();
        TORCH_CHECK(columns.numel() == keys.numel(), "host_counts: ", keys.numel(), " keys but ",
                    columns.numel(), " columns");
        column = columns.data_ptr<int64_t>();
      }
      for (int64_t i = 0; i < keys.numel(); ++i) {
        const int64_t c = column ? column[i] : 0;
        TORCH_CHECK(key[i] >= 0 && key[i] < request.bins && c >= 0 && c < request.column_bins,
                    "host_counts: cell (", key[i], ", ", c, ") outside [0, ", request.bins,
                    ") x [0, ", request.column_bins, ")");
        ++count[static_cast<std::size_t>(key[i] * request.column_bins + c)];
      }
    }
    return split;
  }
  std::vector<torch::Tensor> counts;
  for (const CountRequest& request : requests) {
    // Not bincount: on CUDA it reads the largest key on the host to size its output.
    torch::Tensor keys = request.keys.to(torch::kInt64);
    if (request.columns.defined()) keys = keys * request.column_bins + request.columns;
    counts.push_back(torch::zeros({request.cells()}, keys.options())
                         .index_add_(0, keys, torch::ones_like(keys)));
  }
  const std::vector<int64_t> all = int64_values(torch::cat(counts));
  std::vector<std::vector<int64_t>> split;
  auto next = all.begin();
  for (const CountRequest& request : requests) {
    split.emplace_back(next, next + request.cells());
    next += request.cells();
  }
  return split;
}

namespace {

// The end of the run of `value` that starts at values[begin], in nondecreasing values[begin,
// end): a search that gallops out from the start and halves back, so that it touches the pairs
// near the run rather than the middle of the whole range, as a plain binary search would.
int64_t run_end(const int64_t* values, int64_t begin, int64_t end, int64_t value) {
  int64_t step = 1;
  while (begin + step < end && values[begin + step] <= value) step *= 2;
  return std::upper_bound(values + begin + step / 2, values + std::min(begin + step, end), value) -
         values;
}

}  // namespace

std::vector<int64_t> pair_order_group_counts(const torch::Tensor& home, int64_t ranks,
                                             const torch::Tensor& experts, int64_t num_experts) {
  if (!home.device().is_cpu() || !experts.device().is_cpu())
    return host_counts({{home, ranks, experts, num_experts}}).front();
  const torch::Tensor e = experts.to(torch::kInt64).contiguous();
  const torch::Tensor h = home.to(torch::kInt64).contiguous();
  TORCH_CHECK(e.numel() == h.numel(), "pair_order_group_counts: ", e.numel(), " experts but ",
              h.numel(), " home ranks");
  const int64_t* expert = e.data_ptr<int64_t>();
  const int64_t* home_rank = h.data_ptr<int64_t>();
  const int64_t n = e.numel();
  std::vector<int64_t> counts(static_cast<std::size_t>(ranks * num_experts), 0);
  // Group by group: each ends where its (expert, home rank) is passed, which pair order makes a
  // search. A value out of range is refused as host_counts refuses it, and pairs out of pair
  // order where a group's last pair is not of its group. Others pass unseen: pair order is the
  // callers' to keep, and checking every pair would cost the pass this search saves.
  for (int64_t begin = 0; begin < n;) {
    const int64_t x = expert[begin], r = home_rank[begin];
    TORCH_CHECK(x >= 0 && x < num_experts && r >= 0 && r < ranks, "pair_order_group_counts: cell (",
                r, ", ", x, ") outside [0, ", ranks, ") x [0, ", num_experts, ")");
    const int64_t end = run_end(home_rank, begin, run_end(expert, begin, n, x), r);
    TORCH_CHECK(expert[end - 1] == x && home_rank[end - 1] == r, "pair_order_group_counts: pair ",
                end - 1, " (expert ", expert[end - 1], ", home rank ", home_rank[end - 1],
                ") lies inside the group of (", x, ", ", r, "): the pairs are not in pair order");
    counts[static_cast<std::size_t>(r * num_experts + x)] += end - begin;
    begin = end;
  }
  return counts;
}

torch::Tensor pair_order_ids(const std::vector<int64_t>& groups, int64_t num_experts,
                             const ProcessView& process, const torch::Device& device) {
  const auto ranks = static_cast<int64_t>(groups.size()) / std::max<int64_t>(1, num_experts);
  const int64_t first = process.first_rank(), last = first + process.ranks_per_process;
  TORCH_CHECK(ranks * num_experts == static_cast<int64_t>(groups.size()) && last <= ranks,
              "pair_order_ids: ", groups.size(), " group counts for ", num_experts,
              " experts and ranks ", first, " to ", last - 1);
  int64_t mine = 0;
  for (int64_t h = first; h < last; ++h)
    for (int64_t e = 0; e < num_experts; ++e)
      mine += groups[static_cast<std::size_t>(h * num_experts + e)];
  torch::Tensor ids = torch::empty({mine}, torch::kInt64);
  int64_t* id = ids.data_ptr<int64_t>();
  // Pair order over every process: by expert, then by home rank (each rank's tokens follow the
  // ranks before it), then in the rank's own order. This process's groups are runs of it.
  int64_t start = 0;
  for (int64_t e = 0; e < num_experts; ++e) {
    for (int64_t h = 0; h < ranks; ++h) {
      const int64_t n = groups[static_cast<std::size_t>(h * num_experts + e)];
      if (h >= first && h < last)
        for (int64_t j = 0; j < n; ++j) *id++ = start + j;
      start += n;
    }
  }
  return device.is_cpu() ? ids : ids.to(device);
}

PairLabels pair_order_labels(const std::vector<int64_t>& group_offsets, int64_t ranks_per_process,
                             int64_t first_rank, const torch::Device& device) {
  TORCH_CHECK(ranks_per_process > 0 && !group_offsets.empty() && group_offsets.front() == 0 &&
                  (group_offsets.size() - 1) % static_cast<std::size_t>(ranks_per_process) == 0,
              "pair_order_labels: ", group_offsets.size(), " group offsets from ",
              group_offsets.empty() ? 0 : group_offsets.front(), " for ", ranks_per_process,
              " ranks per process");
  const int64_t n = group_offsets.back();
  // Both rows in one tensor, so that a device takes them in one copy.
  torch::Tensor both = torch::empty({2, n}, torch::kInt64);
  int64_t* expert = both.data_ptr<int64_t>();
  int64_t* home = expert + n;
  for (std::size_t g = 0; g + 1 < group_offsets.size(); ++g) {
    const int64_t begin = group_offsets[g], end = group_offsets[g + 1];
    TORCH_CHECK(begin >= 0 && begin <= end && end <= n, "pair_order_labels: group ", g, " spans [",
                begin, ", ", end, ") of ", n, " pairs");
    const auto r = static_cast<int64_t>(g) % ranks_per_process;
    std::fill(expert + begin, expert + end, static_cast<int64_t>(g) / ranks_per_process);
    std::fill(home + begin, home + end, first_rank + r);
  }
  if (!device.is_cpu()) both = both.to(device);
  return {both[0], both[1]};
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
