#pragma once
// A run's recorded per-expert loads (table expert_load) read back, for a replay driven by them
// (Note [Replay] in docs/notes.md).

#include <cstdint>

#include "store/results_store.hpp"
#include "store/sqlite_handle.hpp"

namespace lrmoe::store {

// The last `last_steps` steps of `run` that recorded loads. Throws StoreError naming the run when
// it does not exist or recorded none.
ExpertLoadHistory read_expert_load_history(const sqlite::Database& db, int64_t run,
                                           int64_t last_steps);

}  // namespace lrmoe::store
