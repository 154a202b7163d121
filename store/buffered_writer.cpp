#include "store/buffered_writer.hpp"

#include <fmt/format.h>

#include "store/utc_timestamp.hpp"

namespace lrmoe::store {

BufferedWriter::BufferedWriter(sqlite::Database& db)
    : db_(db),
      steps_(db, steps_columns()),
      expert_load_(db, expert_load_columns()),
      layer_steps_(db, moe_layer_steps_columns()),
      rank_memory_(db, rank_memory_columns()),
      rank_layers_(db, rank_layer_steps_columns()),
      process_layers_(db, process_layer_steps_columns()),
      trace_spans_(db, trace_spans_columns()),
      placements_(db, placements_columns()),
      events_(db, events_columns()) {}

void BufferedWriter::add_step(int64_t run, const StepRecord& step) {
  steps_.add(run, step);
  flush_if_large();
}

void BufferedWriter::add_expert_load(int64_t run, int64_t step, int64_t layer,
                                     const std::vector<int64_t>& pairs_per_expert) {
  for (size_t expert = 0; expert < pairs_per_expert.size(); ++expert) {
    expert_load_.add(run, {step, layer, static_cast<int64_t>(expert), pairs_per_expert[expert]});
  }
  flush_if_large();
}

void BufferedWriter::add_layer_step(int64_t run, const LayerStepRecord& record) {
  layer_steps_.add(run, record);
  flush_if_large();
}

void BufferedWriter::add_rank_memory(int64_t run, const RankMemoryRecord& record) {
  rank_memory_.add(run, record);
  flush_if_large();
}

void BufferedWriter::add_rank_layer(int64_t run, const RankLayerRecord& record) {
  rank_layers_.add(run, record);
  flush_if_large();
}

void BufferedWriter::add_process_layer(int64_t run, const ProcessLayerRecord& record) {
  process_layers_.add(run, record);
  flush_if_large();
}

void BufferedWriter::add_trace_span(int64_t run, const TraceSpanRecord& record) {
  trace_spans_.add(run, record);
  flush_if_large();
}

void BufferedWriter::add_placement(int64_t run, const PlacementRecord& record) {
  placements_.add(run, record);
  flush_if_large();
}

void BufferedWriter::add_event(int64_t run, const std::string& level, const std::string& message) {
  // Stamped now, not at flush time: the event happened now.
  events_.add(run, {utc_timestamp_now(), level, message});
  flush_if_large();
}

size_t BufferedWriter::buffered_rows() const {
  return steps_.size() + expert_load_.size() + layer_steps_.size() + rank_memory_.size() +
         rank_layers_.size() + process_layers_.size() + trace_spans_.size() + placements_.size() +
         events_.size();
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
  steps_.write();
  expert_load_.write();
  layer_steps_.write();
  rank_memory_.write();
  rank_layers_.write();
  process_layers_.write();
  trace_spans_.write();
  placements_.write();
  events_.write();
  transaction.commit();
}

void BufferedWriter::clear() {
  steps_.clear();
  expert_load_.clear();
  layer_steps_.clear();
  rank_memory_.clear();
  rank_layers_.clear();
  process_layers_.clear();
  trace_spans_.clear();
  placements_.clear();
  events_.clear();
}

}  // namespace lrmoe::store
