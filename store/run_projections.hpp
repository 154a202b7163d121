#pragma once
// Training runs' MoE time to target projected at full size (table run_projections, `lrmoe
// project`; Note [Projection at full size] in docs/notes.md), written and read back.

#include <cstdint>
#include <vector>

#include "store/results_store.hpp"
#include "store/sqlite_handle.hpp"

namespace lrmoe::store {

// Replaces the row of the same run, model, ranks, tokens per rank and profile.
void write_projection(const sqlite::Database& db, const ProjectionRecord& p);

// The rows of `runs`, by run, model, ranks, tokens per rank and profile.
std::vector<ProjectionRecord> read_projections(const sqlite::Database& db,
                                               const std::vector<int64_t>& runs);

}  // namespace lrmoe::store
