#include "store/buffered_writer.hpp"

#include <fmt/format.h>

#include "store/utc_timestamp.hpp"

namespace lrmoe::store {

BufferedWriter::BufferedWriter(sqlite::Database& db)
    : db_(db),
      insert_step_(db.prepare(
          "INSERT INTO steps (run, step, train_loss, eval_loss, lr, grad_norm, tokens, "
          "step_seconds, moe_seconds, moe_modeled_seconds) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)")),
      insert_expert_load_(db.prepare("INSERT INTO expert_load (run, step, layer, expert, pairs) "
                                     "VALUES (?1, ?2, ?3, ?4, ?5)")),
      insert_layer_step_(db.prepare(
          "INSERT INTO moe_layer_steps (run, step, layer, pairs_routed, pairs_dropped, "
          "pairs_kept, replicas, forward_load_max, forward_load_mean, backward_load_max, "
          "backward_load_mean, bytes_forward_dispatch, bytes_forward_combine, "
          "bytes_backward_dispatch, bytes_backward_return, bytes_replica_sync, forward_seconds, "
          "backward_seconds, modeled_seconds, placement_seconds, metric_seconds, "
          "selection_seconds, routing_seconds, compaction_seconds, measured_exchange_bytes, "
          "measured_exchange_seconds) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
          "?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26)")),
      insert_rank_memory_(db.prepare(
          "INSERT INTO rank_memory (run, step, rank, owned, replicas, gradients, optimizer, "
          "forward_tokens, backward_tokens, dense) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)")),
      insert_rank_layer_(db.prepare(
          "INSERT INTO rank_layer_steps (run, step, layer, rank, forward_pairs, backward_pairs, bytes_sent, "
          "bytes_received) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")),
      insert_process_layer_(db.prepare(
          "INSERT INTO process_layer_steps (run, step, layer, process, bytes_sent, bytes_received, "
          "exchange_seconds, exchange_calls, forward_seconds, backward_seconds) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)")),
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

void BufferedWriter::add_layer_step(int64_t run, const LayerStepRecord& record) {
  layer_steps_.push_back({run, record});
  flush_if_large();
}

void BufferedWriter::add_rank_memory(int64_t run, const RankMemoryRecord& record) {
  rank_memory_.push_back({run, record});
  flush_if_large();
}

void BufferedWriter::add_rank_layer(int64_t run, const RankLayerRecord& record) {
  rank_layers_.push_back({run, record});
  flush_if_large();
}

void BufferedWriter::add_process_layer(int64_t run, const ProcessLayerRecord& record) {
  process_layers_.push_back({run, record});
  flush_if_large();
}

void BufferedWriter::add_event(int64_t run, const std::string& level, const std::string& message) {
  // Stamped now, not at flush time: the event happened now.
  events_.push_back({run, utc_timestamp_now(), level, message});
  flush_if_large();
}

size_t BufferedWriter::buffered_rows() const {
  return steps_.size() + expert_load_.size() + layer_steps_.size() + rank_memory_.size() + rank_layers_.size() +
         process_layers_.size() + events_.size();
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
  for (const RunRow<StepRecord>& row : steps_) {
    const StepRecord& r = row.record;
    insert_step_.bind_int64(1, row.run)
        .bind_int64(2, r.step)
        .bind_double(3, r.train_loss)
        .bind_optional_double(4, r.eval_loss)
        .bind_double(5, r.lr)
        .bind_double(6, r.grad_norm)
        .bind_int64(7, r.tokens)
        .bind_double(8, r.step_seconds)
        .bind_double(9, r.moe_seconds)
        .bind_double(10, r.moe_modeled_seconds);
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
  for (const RunRow<LayerStepRecord>& row : layer_steps_) {
    const LayerStepRecord& r = row.record;
    insert_layer_step_.bind_int64(1, row.run)
        .bind_int64(2, r.step)
        .bind_int64(3, r.layer)
        .bind_int64(4, r.pairs_routed)
        .bind_int64(5, r.pairs_dropped)
        .bind_int64(6, r.pairs_kept)
        .bind_int64(7, r.replicas)
        .bind_int64(8, r.forward_load_max)
        .bind_double(9, r.forward_load_mean)
        .bind_int64(10, r.backward_load_max)
        .bind_double(11, r.backward_load_mean)
        .bind_int64(12, r.bytes_forward_dispatch)
        .bind_int64(13, r.bytes_forward_combine)
        .bind_int64(14, r.bytes_backward_dispatch)
        .bind_int64(15, r.bytes_backward_return)
        .bind_int64(16, r.bytes_replica_sync)
        .bind_double(17, r.forward_seconds)
        .bind_double(18, r.backward_seconds)
        .bind_double(19, r.modeled_seconds)
        .bind_double(20, r.placement_seconds)
        .bind_double(21, r.metric_seconds)
        .bind_double(22, r.selection_seconds)
        .bind_double(23, r.routing_seconds)
        .bind_double(24, r.compaction_seconds)
        .bind_int64(25, r.measured_exchange_bytes)
        .bind_double(26, r.measured_exchange_seconds);
    insert_layer_step_.execute();
  }
  for (const RunRow<RankMemoryRecord>& row : rank_memory_) {
    const RankMemoryRecord& r = row.record;
    insert_rank_memory_.bind_int64(1, row.run)
        .bind_int64(2, r.step)
        .bind_int64(3, r.rank)
        .bind_int64(4, r.owned)
        .bind_int64(5, r.replicas)
        .bind_int64(6, r.gradients)
        .bind_int64(7, r.optimizer)
        .bind_int64(8, r.forward_tokens)
        .bind_int64(9, r.backward_tokens)
        .bind_int64(10, r.dense);
    insert_rank_memory_.execute();
  }
  for (const RunRow<RankLayerRecord>& row : rank_layers_) {
    const RankLayerRecord& r = row.record;
    insert_rank_layer_.bind_int64(1, row.run)
        .bind_int64(2, r.step)
        .bind_int64(3, r.layer)
        .bind_int64(4, r.rank)
        .bind_int64(5, r.forward_pairs)
        .bind_int64(6, r.backward_pairs)
        .bind_int64(7, r.bytes_sent)
        .bind_int64(8, r.bytes_received);
    insert_rank_layer_.execute();
  }
  for (const RunRow<ProcessLayerRecord>& row : process_layers_) {
    const ProcessLayerRecord& r = row.record;
    insert_process_layer_.bind_int64(1, row.run)
        .bind_int64(2, r.step)
        .bind_int64(3, r.layer)
        .bind_int64(4, r.process)
        .bind_int64(5, r.bytes_sent)
        .bind_int64(6, r.bytes_received)
        .bind_double(7, r.exchange_seconds)
        .bind_int64(8, r.exchange_calls)
        .bind_double(9, r.forward_seconds)
        .bind_double(10, r.backward_seconds);
    insert_process_layer_.execute();
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
  layer_steps_.clear();
  rank_memory_.clear();
  rank_layers_.clear();
  process_layers_.clear();
  events_.clear();
}

}  // namespace lrmoe::store
