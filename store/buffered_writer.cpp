#include "store/buffered_writer.hpp"

#include <fmt/format.h>

#include "store/utc_timestamp.hpp"

namespace lrmoe::store {

BufferedWriter::BufferedWriter(sqlite::Database& db)
    : db_(db),
      insert_step_(
          db.prepare("INSERT INTO steps (run, step, train_loss, eval_loss, lr, grad_norm, tokens, "
                     "step_seconds, moe_seconds) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")),
      insert_expert_load_(db.prepare("INSERT INTO expert_load (run, step, layer, expert, pairs) "
                                     "VALUES (?1, ?2, ?3, ?4, ?5)")),
      insert_event_(
          db.prepare("INSERT INTO events (run, time, level, message) VALUES (?1, ?2, ?3, ?4)")) {}

void BufferedWriter::add_step(int64_t run, const StepRecord& step) {
  steps_.push_back({run, step});
  flush_if_large();
}

void BufferedWriter::add_expert_load(int64_t run, int64_t step, int64_t layer,
                                     const std::vector<int64_t>& pairs_per_expert) {
  for (size_t expert = 0; expert < pairs_per_expert.size(); ++expert) {
    expert_load_.push_back(
        {run, step, layer, static_cast<int64_t>(expert), pairs_per_expert[expert]});
  }
  flush_if_large();
}

void BufferedWriter::add_event(int64_t run, const std::string& level, const std::string& message) {
  // Stamped now, not at flush time: the event happened now.
  events_.push_back({run, utc_timestamp_now(), level, message});
  flush_if_large();
}

size_t BufferedWriter::buffered_rows() const {
  return steps_.size() + expert_load_.size() + events_.size();
}

void BufferedWriter::flush_if_large() {
  if (buffered_rows() > kAutoFlushRows) flush();
}

void BufferedWriter::flush() {
  if (buffered_rows() == 0) return;
  try {
    write_buffered_rows();
  } catch (const StoreError& error) {
    const size_t dropped = buffered_rows();
    clear();
    throw StoreError(fmt::format("{} ({} buffered rows were not written)", error.what(), dropped));
  }
  clear();
}

void BufferedWriter::write_buffered_rows() {
  sqlite::Transaction transaction(db_);
  // Steps first: they are what a reader of a half-finished run looks at.
  for (const StepRow& row : steps_) {
    const StepRecord& r = row.record;
    insert_step_.bind_int64(1, row.run)
        .bind_int64(2, r.step)
        .bind_double(3, r.train_loss)
        .bind_optional_double(4, r.eval_loss)
        .bind_double(5, r.lr)
        .bind_double(6, r.grad_norm)
        .bind_int64(7, r.tokens)
        .bind_double(8, r.step_seconds)
        .bind_double(9, r.moe_seconds);
    insert_step_.execute();
  }
  for (const ExpertLoadRow& row : expert_load_) {
    insert_expert_load_.bind_int64(1, row.run)
        .bind_int64(2, row.step)
        .bind_int64(3, row.layer)
        .bind_int64(4, row.expert)
        .bind_int64(5, row.pairs);
    insert_expert_load_.execute();
  }
  for (const EventRow& row : events_) {
    insert_event_.bind_int64(1, row.run)
        .bind_text(2, row.time)
        .bind_text(3, row.level)
        .bind_text(4, row.message);
    insert_event_.execute();
  }
  transaction.commit();
}

void BufferedWriter::clear() {
  steps_.clear();
  expert_load_.clear();
  events_.clear();
}

}  // namespace lrmoe::store
