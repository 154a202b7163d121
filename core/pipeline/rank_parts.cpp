#include "core/pipeline/rank_parts.hpp"

#include <algorithm>

namespace lrmoe {

std::vector<RankPart> rank_parts(const ProcessSlice& slice, const InstanceTable& table,
                                 const ProcessView& process) {
  std::vector<RankPart> parts;
  const std::vector<int64_t>& ranks = table.instance_rank;  // non-decreasing
  const std::vector<int64_t>& offsets = slice.instance_offsets;
  for (int64_t rank = process.first_rank(); rank < process.first_rank() + process.ranks_per_process;
       ++rank) {
    RankPart part;
    part.rank = rank;
    part.first_instance = std::lower_bound(ranks.begin(), ranks.end(), rank) - ranks.begin();
    part.instances =
        (std::upper_bound(ranks.begin(), ranks.end(), rank) - ranks.begin()) - part.first_instance;
    const auto first = static_cast<std::size_t>(part.first_instance);
    part.first_row = offsets[first];
    part.rows = offsets[first + static_cast<std::size_t>(part.instances)] - part.first_row;
    for (int64_t i = 0; i <= part.instances; ++i) {
      part.offsets.push_back(offsets[first + static_cast<std::size_t>(i)] - part.first_row);
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

}  // namespace lrmoe
