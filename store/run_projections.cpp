#include "store/run_projections.hpp"

#include <utility>

namespace lrmoe::store {

void write_projection(const sqlite::Database& db, const ProjectionRecord& p) {
  db.prepare(
        "INSERT OR REPLACE INTO run_projections (run, model, ranks, tokens_per_rank, profile, "
        "sampled_steps, steps, reached, compute_seconds, all_to_all_seconds, gather_seconds, "
        "transfer_seconds, projected_seconds, failed, memory_per_rank) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)")
      .bind_int64(1, p.run)
      .bind_text(2, p.model)
      .bind_int64(3, p.ranks)
      .bind_int64(4, p.tokens_per_rank)
      .bind_text(5, p.profile)
      .bind_text(6, p.sampled_steps)
      .bind_int64(7, p.steps)
      .bind_int64(8, p.reached ? 1 : 0)
      .bind_double(9, p.compute_seconds)
      .bind_double(10, p.all_to_all_seconds)
      .bind_double(11, p.gather_seconds)
      .bind_double(12, p.transfer_seconds)
      .bind_double(13, p.projected_seconds)
      .bind_optional_text(14, p.failed)
      .bind_text(15, p.memory_per_rank)
      .execute();
}

std::vector<ProjectionRecord> read_projections(const sqlite::Database& db,
                                               const std::vector<int64_t>& runs) {
  std::vector<ProjectionRecord> result;
  sqlite::Statement select = db.prepare(
      "SELECT run, model, ranks, tokens_per_rank, profile, sampled_steps, steps, reached, "
      "compute_seconds, all_to_all_seconds, gather_seconds, transfer_seconds, "
      "projected_seconds, failed, memory_per_rank FROM run_projections WHERE run = ?1 "
      "ORDER BY model, ranks, tokens_per_rank, profile");
  for (const int64_t run : runs) {
    select.reset();
    select.bind_int64(1, run);
    while (select.step()) {
      ProjectionRecord p;
      p.run = select.column_int64(0);
      p.model = select.column_text(1);
      p.ranks = select.column_int64(2);
      p.tokens_per_rank = select.column_int64(3);
      p.profile = select.column_text(4);
      p.sampled_steps = select.column_text(5);
      p.steps = select.column_int64(6);
      p.reached = select.column_int64(7) != 0;
      p.compute_seconds = select.column_double(8);
      p.all_to_all_seconds = select.column_double(9);
      p.gather_seconds = select.column_double(10);
      p.transfer_seconds = select.column_double(11);
      p.projected_seconds = select.column_double(12);
      if (!select.column_is_null(13)) p.failed = select.column_text(13);
      p.memory_per_rank = select.column_text(14);
      result.push_back(std::move(p));
    }
  }
  return result;
}

}  // namespace lrmoe::store
