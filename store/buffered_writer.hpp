#pragma once
// The hot-path writer: steps, expert load, layer statistics, rank memory and events are
// collected in memory and written by flush() in one transaction, through prepared statements
// that are reused for every row. One transaction per row would cost a disk sync per row; one per
// flush costs one. Each table's INSERT and binds come from its column list
// (store/recorded_tables.cpp), so nothing here names a column.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "store/column_list.hpp"
#include "store/recorded_tables.hpp"
#include "store/results_store.hpp"
#include "store/sqlite_handle.hpp"

namespace lrmoe::store {

class BufferedWriter {
 public:
  // Past this many buffered rows an add flushes on its own, bounding memory on long runs that
  // flush rarely (a step with 12 MoE layers x 64 experts on 8 ranks adds 789 rows).
  static constexpr size_t kAutoFlushRows = 20000;

  explicit BufferedWriter(sqlite::Database& db);

  void add_step(int64_t run, const StepRecord& step);
  void add_expert_load(int64_t run, int64_t step, int64_t layer,
                       const std::vector<int64_t>& pairs_per_expert);
  void add_layer_step(int64_t run, const LayerStepRecord& record);
  void add_rank_memory(int64_t run, const RankMemoryRecord& record);
  void add_rank_layer(int64_t run, const RankLayerRecord& record);
  void add_process_layer(int64_t run, const ProcessLayerRecord& record);
  void add_trace_span(int64_t run, const TraceSpanRecord& record);
  void add_placement(int64_t run, const PlacementRecord& record);
  void add_event(int64_t run, const std::string& level, const std::string& message);

  // Writes every buffered row in one transaction. On failure nothing of the batch is written
  // and the batch is dropped (the error says how many rows), so that one bad row cannot make
  // every later flush, and with it finish_run, fail too.
  void flush();

  size_t buffered_rows() const;

 private:
  // One table's buffered rows and the prepared INSERT, generated from its column list
  // (store/recorded_tables.hpp), that writes them.
  template <typename Record>
  class BufferedTable {
   public:
    BufferedTable(sqlite::Database& db, const ColumnList<Record>& columns)
        : columns_(columns), insert_(db.prepare(columns.insert_sql())) {}

    void add(int64_t run, Record record) { rows_.push_back({run, std::move(record)}); }
    void write() {
      for (const Row& row : rows_) {
        columns_.bind(insert_, row.run, row.record);
        insert_.execute();
      }
    }
    size_t size() const { return rows_.size(); }
    void clear() { rows_.clear(); }

   private:
    struct Row {
      int64_t run;
      Record record;
    };
    const ColumnList<Record>& columns_;
    sqlite::Statement insert_;
    std::vector<Row> rows_;
  };

  void flush_if_large();
  void write_buffered_rows();
  void clear();

  sqlite::Database& db_;
  BufferedTable<StepRecord> steps_;
  BufferedTable<ExpertLoadRecord> expert_load_;
  BufferedTable<LayerStepRecord> layer_steps_;
  BufferedTable<RankMemoryRecord> rank_memory_;
  BufferedTable<RankLayerRecord> rank_layers_;
  BufferedTable<ProcessLayerRecord> process_layers_;
  BufferedTable<TraceSpanRecord> trace_spans_;
  BufferedTable<PlacementRecord> placements_;
  BufferedTable<EventRecord> events_;
};

}  // namespace lrmoe::store
