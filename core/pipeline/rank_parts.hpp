#pragma once
// The part of a process's destination rows that each of its logical ranks computes: ranks host
// contiguous runs of instances (instances go by rank, Note [Pair order] in docs/notes.md), so
// each rank's rows are one contiguous run too. The expert computation runs and times rank by
// rank over these parts (Note [Critical path] in docs/notes.md).

#include <cstdint>
#include <vector>

#include "core/pipeline/instance_table.hpp"
#include "core/pipeline/pair_layout.hpp"
#include "core/pipeline/process_view.hpp"

namespace lrmoe {

struct RankPart {
  int64_t rank = 0;
  // the rank's instances: [first_instance, first_instance + instances)
  int64_t first_instance = 0;
  int64_t instances = 0;
  int64_t first_row = 0;  // its rows among the process's destination rows
  int64_t rows = 0;
  std::vector<int64_t> offsets;  // [instances + 1] rows of each of its instances, from 0
};

// One part per rank of `process`, in rank order.
std::vector<RankPart> rank_parts(const ProcessSlice& slice, const InstanceTable& table,
                                 const ProcessView& process);

}  // namespace lrmoe
