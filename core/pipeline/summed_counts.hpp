#pragma once
// Counts every process agrees on in the scalable plan (Note [Scalable planning] in
// docs/notes.md): counts of each process's own pairs (expert_counts.hpp), summed over the
// processes in one all-reduce.

#include <vector>

#include "core/distributed/collectives.hpp"

namespace lrmoe {

// `counts`, this process's, summed over the processes in place, in one all-reduce.
std::vector<int64_t> summed_over_processes(Collectives& collectives, std::vector<int64_t> counts);

// `counts`, this process's, each summed over the processes, in one all-reduce of their
// concatenation. Built by moving the vectors in: a braced list would copy each (its elements
// are const), and at 64 ranks such copies of [ranks * instances] counts showed in profiles.
std::vector<std::vector<int64_t>> summed_over_processes(Collectives& collectives,
                                                        std::vector<std::vector<int64_t>> counts);

}  // namespace lrmoe
