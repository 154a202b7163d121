#pragma once
// Which experts' weights cross processes for one pass once expert state is sharded
// (docs/ARCHITECTURE.md, "Expert-sharded state"). Expert e's master weights, gradient and
// optimizer state live only on its home: the rank of its static owner (lrmoe/static_owners.hpp,
// rank e / ceil(E/R)), in the process that hosts that rank. A process computes an instance of an
// expert homed elsewhere with weights fetched from the home for the pass, once however many of
// its ranks and slots host that expert, and sends the gradient back.
//
// A pure function of the pass's instance table, the same on every process: who sends what to
// whom needs no collective of its own.

#include <cstdint>
#include <vector>

#include "core/pipeline/instance_table.hpp"
#include "core/pipeline/process_view.hpp"

namespace lrmoe {

// The experts whose state one process holds: [first, first + count), in expert order.
struct ExpertShard {
  int64_t first = 0;
  int64_t count = 0;

  bool holds(int64_t expert) const { return expert >= first && expert < first + count; }
};

// The home experts of process `process` of `view` (its index, processes and ranks per process).
// Contiguous: the process's ranks are consecutive, and so are each rank's static experts.
ExpertShard home_shard(int64_t num_experts, int64_t ranks, const ProcessView& view,
                       int64_t process);
// The process whose ranks include `expert`'s home.
int64_t home_process(int64_t expert, int64_t num_experts, int64_t ranks, const ProcessView& view);

struct ExpertFetchPlan {
  ExpertShard home;  // this process's
  // [processes]: the experts (increasing) this process sends to each process, all of them its
  // home experts, and those it receives from each, homed there. Empty for this process itself.
  std::vector<std::vector<int64_t>> send;
  std::vector<std::vector<int64_t>> receive;
  // The experts received, in arrival order: by source process, then expert.
  std::vector<int64_t> fetched;
  // [num_experts]: each expert's matrix in this process's weight bank for the pass (its home
  // experts, then the fetched ones: home e at e - home.first, fetched i at home.count + i), or -1
  // for an expert no rank of this process hosts and it does not hold.
  std::vector<int64_t> bank_index;

  int64_t sent() const;  // experts sent, over every process
};

// The plan of process `view.index` for a pass whose instances are `table`'s.
ExpertFetchPlan plan_expert_fetch(const InstanceTable& table, int64_t num_experts, int64_t ranks,
                                  const ProcessView& view);

}  // namespace lrmoe
