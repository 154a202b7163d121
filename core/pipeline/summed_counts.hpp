#pragma once
// Counts every process agrees on in the scalable plan (Note [Scalable planning] in
// docs/notes.md): bincounts of each process's own pairs, summed over the processes in one
// all-reduce.

#include <vector>

#include "core/distributed/collectives.hpp"
#include "core/pipeline/expert_counts.hpp"

namespace lrmoe {

// The bincounts of `requests` (keys on any device), each summed over the processes, on the
// host: one device-to-host copy and one all-reduce for all of them.
std::vector<std::vector<int64_t>> summed_counts(Collectives& collectives,
                                                const std::vector<CountRequest>& requests);

// `counts`, this process's, each summed over the processes, in one all-reduce.
std::vector<std::vector<int64_t>> summed_over_processes(Collectives& collectives,
                                                        std::vector<std::vector<int64_t>> counts);

}  // namespace lrmoe
